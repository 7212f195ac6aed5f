"""The .tflite file without running it: the flatbuffer reader, the schema's names, the Edge TPU package, metadata
(edgekit's record, Ultralytics' and other exporters'), and rewrites of the flatbuffer.
"""
