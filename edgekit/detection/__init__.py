"""Detectors on the host: output layouts, the YOLO head finder, the cut before the decode, and the COCO/YOLO data
readers. Decode and NMS ship to the board (:mod:`edgekit.board.decode`).
"""
