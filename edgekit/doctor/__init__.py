"""``edgekit doctor``: what this machine needs to run (or compile for) an Edge TPU, from rules with evidence."""
