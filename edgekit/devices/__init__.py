"""Everything that runs a model on hardware. Never imports TensorFlow or edgekit.converters."""
