"""What ships to a Coral board and runs there on Python 3.7: the TFLite runtime (backends, delegate, fallback), the
classifier and detector, decode and NMS, preprocessing, the bundle manifest, and the board's runner. Nothing
here imports outside this folder but ``edgekit.errors`` (tests/test_structure.py and the vermin test say so).
"""
