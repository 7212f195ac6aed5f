"""Training small models (the digits CNN used by the demo and the tests; ``edgekit train`` later)."""
