"""Inputs read from disk without TensorFlow, below both halves: labelled image sets (class folders, arrays) for
calibration and evaluate, and the image arguments classify takes (files, folders, globs)."""
