"""The Edge TPU's rules and its compiler, without TensorFlow: the offline check engine (``compatibility``), the op
versions the 2021 compiler takes, the compiler's driver and words, compiling elsewhere (``--via``).
"""
