"""What the rules rest on: evidence references, the status words' sources, the op types seen mapped."""

from __future__ import annotations

from edgekit.edgetpu.compatibility.words import (
    CUSTOM_UNRESOLVED,
    DATA_TYPE,
    DYNAMIC,
    MAPPED,
    MORE_THAN_ONE_SUBGRAPH,
    NOT_CONSTANT,
    NOT_SUPPORTED,
    PARSE_FAILED,
    RANK,
    STRIDES,
    UNSPECIFIED,
    VERSION,
)

# Evidence references, each checked by tests/converters/test_evidence.py: ``pair:<id>`` a public pair
# of the evidence ledger (tests/fixtures/evidence/SOURCES.tsv), ``testdata:<stem>`` a compiled pair in
# ../shared/testdata, ``log:<file>`` real compiler output in tests/fixtures/compiler, ``report:<key>``
# a public report listed in tests/fixtures/evidence/REPORTS.tsv (Coral's documentation among them).
Refs = tuple  # of str
DOCS: Refs = ("report:coral-supported-ops",)
EV_YOLOV8N: Refs = ("testdata:coral_wifi_webserver__yolov8n_full_integer_quant",)
EV_SRGAN: Refs = ("testdata:srgan__srgan_quant_2",)  # compiled with -a: three edgetpu-custom-op
EV_FLOAT_IO: Refs = ("log:v16_float_io_yolov8s_160_CPU.log", "testdata:coralmicro__yamnet_spectra_in")
EV_DEEPLAB: Refs = ("testdata:deeplabv3_mnv2_dm05_pascal_quant", "testdata:coral-edgetpu__deeplabv3_mnv2_pascal_quant")
# Coral's own decoder models, built by compiling the part before the custom op and joining it back.
EV_DECODERS: Refs = (
    "testdata:posenet__posenet_mobilenet_v1_075_353_481_quant_decoder",
    "testdata:bodypix__bodypix_mobilenet_v1_075_640_480_16_quant_decoder",
)
EV_UNRESOLVED: Refs = ("report:coral-unresolved-custom-op",)
# A Keras EfficientNet converted with a -1 batch, whose Reshape layers get a shape computed at run
# time, fails; srgan compiled despite -1 batches, its shapes being constant.
EV_DYNAMIC: Refs = ("log:v16_dynamic_tensors.txt", "testdata:srgan__srgan_quant_2")

#: The status words check prints, each with the real output that shows them (a log shows them
#: verbatim; edgekit's own words for whole-model failures cite the output they stand for).
STATUS_WORDS: dict[str, Refs] = {
    MAPPED: ("log:v16_full_yolov5s_160.log",),
    MORE_THAN_ONE_SUBGRAPH: ("log:v15_partial_yolov5s_stdout.txt",),
    UNSPECIFIED: ("log:v15_partial_yolov5s_stdout.txt", "log:v16_float_io_yolov8s_160_CPU.log"),
    NOT_SUPPORTED: ("log:v15_partial_yolov5s_stdout.txt",),
    DATA_TYPE: ("log:v16_float_io_yolov8s_160_CPU.log",),
    VERSION: ("log:v15_partial_yolov5s_stdout.txt",),
    NOT_CONSTANT: DOCS,
    RANK: ("report:google-coral/edgetpu#708",),
    STRIDES: ("log:v15_partial_yolov5s_stdout.txt",),
    PARSE_FAILED: ("log:v16_op_version_exp.txt",),
    DYNAMIC: ("log:v16_dynamic_tensors.txt",),
    CUSTOM_UNRESOLVED: EV_UNRESOLVED,
}

#: Op types a real compile shows mapped, each with compiles that show it (tests check every one maps
#: the op); the other supported ops rest on Coral's table alone, so check reports their mapping as
#: uncertain.
SEEN_MAPPED: dict[str, Refs] = {
    "ADD": (
        "testdata:deeplabv3_mnv2_dm05_pascal_quant",
        "pair:amichielsen+EmbeddedAI__mobilenet_v2_1.0_224_quant",
        "pair:anggadharma60+Pi-Demo__models__MobileNetV2",
    ),
    "AVERAGE_POOL_2D": (
        "testdata:mobilenet_v1_0.25_128_quant",
        "pair:EscVM+Edge_TPU_Face_Mask_Detection__models__mobilenet_v2_mask_classification",
        "pair:KeondoPark+coral_mask__train_mask_detector__mask_detector_quant_v2",
    ),
    "CONCATENATION": (
        "testdata:split_concat",
        "pair:atemaguer+drowsy-driver-detection__models__face_detection_front_128_full_integer_quant",
        "pair:G-aad-a+ddu-eksamen__best_full_integer_quant",
    ),
    "CONV_2D": (
        "testdata:mobilenet_v1_0.25_128_quant",
        "pair:amichielsen+EmbeddedAI__mobilenet_v2_1.0_224_quant",
        "pair:anggadharma60+Pi-Demo__models__MobileNetV2",
    ),
    "DEPTHWISE_CONV_2D": (
        "testdata:mobilenet_v1_0.25_128_quant",
        "pair:amichielsen+EmbeddedAI__mobilenet_v2_1.0_224_quant",
        "pair:anggadharma60+Pi-Demo__models__MobileNetV2",
    ),
    "FULLY_CONNECTED": (
        "testdata:keras_lstm_mnist_ptq",
        "pair:amichielsen+EmbeddedAI__mobilenet_v2_1.0_224_quant",
        "pair:anggadharma60+Pi-Demo__models__MobileNetV2",
    ),
    "L2_NORMALIZATION": ("report:jiri-kula/EfficientDet",),
    "LOGISTIC": (
        "testdata:coralmicro__yamnet_spectra_in",
        "pair:anggadharma60+Pi-Demo__models__MobileNetV2",
        "pair:EscVM+Edge_TPU_Face_Mask_Detection__models__mobilenet_v2_mask_classification",
    ),
    "MAXIMUM": ("pair:atemaguer+drowsy-driver-detection__models__face_landmark_192_full_integer_quant",),
    "MAX_POOL_2D": (
        "testdata:coral_wifi_webserver__yolov8n_full_integer_quant",
        "pair:atemaguer+drowsy-driver-detection__models__face_detection_front_128_full_integer_quant",
        "pair:EscVM+RPS_with_Edge_TPU__bin__rps",
    ),
    "MEAN": (
        "testdata:coralmicro__yamnet_spectra_in",
        "pair:amichielsen+EmbeddedAI__mobilenet_v2_1.0_224_quant",
        "pair:anggadharma60+Pi-Demo__models__MobileNetV2",
    ),
    "MUL": (
        "testdata:coral_wifi_webserver__yolov8n_full_integer_quant",
        "pair:atemaguer+drowsy-driver-detection__models__face_landmark_192_full_integer_quant",
        "pair:G-aad-a+ddu-eksamen__best_full_integer_quant",
    ),
    "PACK": ("pair:prbodmann+Coral-TPU__transformer__models__efficient_l3",),
    "PAD": (
        "testdata:bodypix__bodypix_mobilenet_v1_075_640_480_16_quant_decoder",
        "pair:amichielsen+EmbeddedAI__mobilenet_v2_1.0_224_quant",
        "pair:anggadharma60+Pi-Demo__models__MobileNetV2",
    ),
    "PRELU": (
        "testdata:srgan__srgan_quant_2",
        "pair:LEE2020957316+raspberry-pi5-edgetpu-inference__models__facial_expression_recognition_mobilefacenet_2022july_full_integer_quant",
    ),
    "QUANTIZE": (
        "testdata:keras_lstm_mnist_ptq",
        "pair:amichielsen+EmbeddedAI__mobilenet_v2_1.0_224_quant",
        "pair:anggadharma60+Pi-Demo__models__MobileNetV2",
    ),
    "RELU": (
        "report:mathieugalle/edgetpu-compiler-pad-fail",
        "pair:mathieugalle+edgetpu-compiler-pad-fail__mobile_retina_net_not_padded",
    ),
    "RESHAPE": (
        "testdata:mobilenet_v1_0.25_128_quant",
        "pair:atemaguer+drowsy-driver-detection__models__face_detection_front_128_full_integer_quant",
        "pair:G-aad-a+ddu-eksamen__best_full_integer_quant",
    ),
    "RESIZE_BILINEAR": ("report:eehoeskrap/PaperReview#15",),
    "RESIZE_NEAREST_NEIGHBOR": (
        "testdata:coral_wifi_webserver__yolov8n_full_integer_quant",
        "pair:G-aad-a+ddu-eksamen__best_full_integer_quant",
        "pair:LordSweetPoison+Birdnet-Edge__models__best-int8",
    ),
    "RSQRT": ("pair:prbodmann+Coral-TPU__transformer__models__efficient_l3",),
    "SLICE": ("report:tensorflow/models#10695",),
    "SOFTMAX": (
        "testdata:mobilenet_v1_0.25_128_quant",
        "pair:amichielsen+EmbeddedAI__mobilenet_v2_1.0_224_quant",
        "pair:anggadharma60+Pi-Demo__models__MobileNetV2_V2",
    ),
    "SPLIT": ("testdata:split_concat",),
    "SQUARED_DIFFERENCE": ("pair:prbodmann+Coral-TPU__transformer__models__efficient_l3",),
    "STRIDED_SLICE": (
        "testdata:coral_wifi_webserver__yolov8n_full_integer_quant",
        "pair:G-aad-a+ddu-eksamen__best_full_integer_quant",
        "pair:LordSweetPoison+Birdnet-Edge__models__best-int8",
    ),
    "SUB": (
        "log:v16_float_io_yolov8s_160_CPU.log",
        "pair:mistake0316+Google-Coral-Style-Transfer__model__dark_Encoder",
        "pair:prbodmann+Coral-TPU__transformer__models__efficient_l3",
    ),
    "SUM": ("report:jiri-kula/EfficientDet",),
    "TANH": ("testdata:srgan__srgan_quant_2",),
    "TRANSPOSE": (
        "testdata:coral_wifi_webserver__yolov8n_full_integer_quant",
        "pair:G-aad-a+ddu-eksamen__best_full_integer_quant",
        "pair:nerbivol+edgetpu_lite__yolov8n_full_integer_quant",
    ),
    "UNIDIRECTIONAL_SEQUENCE_LSTM": ("testdata:keras_lstm_mnist_ptq",),
    # A TF 2.10 model (TRANSPOSE_CONV v3) with four Conv2DTranspose layers: compiler 16 mapped three of them.
    "TRANSPOSE_CONV": ("report:google-coral/edgetpu#686",),
}

#: What check's placement under ``-a`` (every mappable run its own Edge TPU subgraph) rests on: the compiled
#: pairs made with ``-a`` that check matches op by op, the one public ``-a`` log of a large detector (yolov5s
#: at 224, 2 Edge TPU subgraphs; its CPU model, 7.37 MiB, is not public in a form that can be had, so the log
#: cannot score a placement) and Coral's word that ``-a`` leaves a run on the CPU when one of its activations
#: does not fit in memory (docs/edgetpu-compatibility.md, "Compiled with -a").
EV_MULTIPLE_SUBGRAPHS: Refs = (
    "testdata:srgan__srgan_quant_2",
    "pair:prbodmann+Coral-TPU__transformer__models__efficient_l3",
    "log:v16_partial_yolov5s_224_stdout.txt",
    "report:google-coral/edgetpu#356",
)
