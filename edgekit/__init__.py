"""edgekit: Keras image classifiers onto Google's Coral Edge TPU, with a CPU fallback."""

__version__ = "0.1.0"
