"""Everything that turns one model into another. Heavy dependencies (TensorFlow) are imported lazily."""
