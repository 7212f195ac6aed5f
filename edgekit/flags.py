"""Every argument and option of the ``edgekit`` command line, declared once.

Each :class:`Option` holds its flags, the name it has in Python (the keyword of :mod:`edgekit.api` and
the parameter of the click command), its value's type, default and help text. :data:`COMMANDS` lists
which command takes which, in the order ``--help`` shows them. From this one table come the click
options (:mod:`edgekit.cli.commands`), ``--help``, the option tables of ``docs/commands/*.md``
(:mod:`edgekit.cli.docs`) and the defaults of :mod:`edgekit.api`. An option that two commands take with
the same meaning is one declaration (``--device``, the SSH options, quantize's options in build, ``-m``), its
help worded for a command by :func:`worded` where that reads better; where the meaning or default differs
(``--conf`` of detect and of evaluate, ``--timeout`` of SSH and of compile), there are two.
The frozen dataclass :class:`edgekit.converters.quantize_options.QuantizeOptions` (quantize's options, one field each) takes
its defaults from :data:`QUANTIZE`.

Plain data: it imports neither click nor anything heavy, so the API can read its defaults for free.
"""

from __future__ import annotations

from typing import Any, NamedTuple

#: The longest timeout a flag takes: a week (the compiler's timer and Python's waits overflow far above).
MAX_TIMEOUT = 7 * 24 * 3600.0

Number = int | float


class Option(NamedTuple):
    """One option, made by :func:`option`: ``flags`` as typed (the first one names it in errors), ``name`` in
    Python, and its value: ``type`` is ``text``, ``int``, ``float``, ``choice`` (``choices``), ``path`` (any
    path), ``file`` (an existing-or-new file, never a folder), ``dir`` (a folder, never a file), ``out-file`` (a
    path that is not a folder) or ``flag`` (on/off, default off). ``minimum``/``maximum`` bound a number
    (``minimum_open``: excluded); a bounded float also refuses nan and infinities."""

    flags: tuple[str, ...]
    name: str
    help: str = ""
    type: str = "text"
    default: Any = None
    required: bool = False
    show_default: bool = True  # shown in --help when there is a default (and the option is no flag)
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    minimum: Number | None = None
    maximum: Number | None = None
    minimum_open: bool = False
    multiple: bool = False


class Argument(NamedTuple):
    """A positional argument: ``nargs=-1`` takes one or more."""

    name: str
    type: str = "text"  # as Option's: text, path, file
    nargs: int = 1


def option(
    *flags: str, name: str = "", type: str = "text", choices: tuple[str, ...] = (), default: Any = None, **fields: Any
) -> Option:
    """``option("--top-k", "-k", type="int", default=5, ...)``: an :class:`Option`, its flags written as click
    takes them. ``name`` defaults to the long flag's (``--top-k`` -> ``top_k``); ``choices`` make it a choice."""
    if not name:
        name = next(f for f in flags if f.startswith("--"))[2:].replace("-", "_")
    if type == "flag":
        default = False  # a flag is off unless given
    return Option(flags, name, type="choice" if choices else type, choices=choices, default=default, **fields)


def worded(o: Option, help: str) -> Option:
    """The option ``o`` (one declaration: its flags, name, value and default) with its help worded for another
    command, where the same option reads better in that command's words (``--help`` and the docs show it)."""
    return o._replace(help=help)


# ------------------------------------------------------------------------------ shared by every command
JSON = option(
    "--json",
    name="as_json",
    type="flag",
    help="Print one JSON document (its schema: the command's page in docs/commands/).",
)
QUIET = option("--quiet", "-q", type="flag", help="No progress bars or informational messages.")

# ------------------------------------------------------------------------------ running a model
DEVICE = option("--device", "-d", default="auto", help="auto, cpu, usb, usb:N, pci, pci:N or :N (pycoral's grammar).")
RUN_MODEL = option(
    "--model",
    "-m",
    required=True,
    type="path",
    help="The .tflite model (an *_edgetpu.tflite runs on the Edge TPU, or falls back to its CPU twin), "
    "or a bundle folder from edgekit build (its compiled or CPU model by device, sha256-verified; "
    "with --on, a .tflite is bundled on the fly).",
)
MEAN = option("--mean", help="Override the preprocessing mean (one value or R,G,B), on 0..255 pixels.")
STD = option("--std", help="Override the preprocessing std (one value or R,G,B).")
THREADS = option("--threads", type="int", minimum=1, help="CPU interpreter threads (default: the cores, at most 4).")
ON = option(
    "--on",
    metavar="USER@HOST",
    help="Run on a Coral Dev Board (or any board with python3) over SSH: "
    "deploys the bundle -m (or one made of the .tflite -m) when needed.",
)
LAYOUTS = ("postprocess", "yolo", "yolov5", "split-dfl", "end2end")
LAYOUT = option(
    "--layout",
    choices=LAYOUTS,
    help="Detectors: the output layout of the int8 model (or of a detector "
    ".tflite given to build), when its outputs fit several (default: read from them; never guessed); "
    "recorded with the model.",
)
LABELS = option(
    "--labels",
    "-l",
    type="file",
    help="Labels: '0 cat', '0: cat' or one per line (default: the labels recorded with the model).",
)

# ------------------------------------------------------------------------------ loading a Keras model
ARCH = option(
    "--arch", help="For weights-only files: module.py:function or package.module:function that builds the model."
)
CUSTOM_OBJECTS = option(
    "--custom-objects", type="file", help="A .py file defining the model's custom layers/functions."
)
TRUST_MODEL = option(
    "--trust-model",
    type="flag",
    help="Allow loading Lambda layers (runs code stored in the file) "
    "and SavedModels with file or system operations (a SavedModel is a program).",
)
VERBOSE = option("--verbose", "-v", type="flag", help="Show TensorFlow's own log output.")
TFRECORD_KEY = option(
    "--tfrecord-key", default="image/encoded", help="Feature holding the encoded image in TFRecord examples."
)

# ------------------------------------------------------------------------------ reaching a board over SSH
SSH = (
    option("--port", "-p", type="int", minimum=1, maximum=65535, help="SSH port on the board (default 22)."),
    option(
        "--identity",
        "-i",
        type="file",
        help="Private key to log in with (default: ssh's own keys and agent; never a password).",
    ),
    option(
        "--path",
        name="remote_path",
        default="edgekit",
        help="Folder on the board for bundles and the runner (relative: in the login user's home).",
    ),
    option(
        "--python",
        default="python3",
        help="Python on the board (3.7 or newer, with numpy, Pillow and pycoral or tflite_runtime).",
    ),
    option(
        "--known-hosts",
        type="file",
        help="known_hosts file to check the board's host key against (default: ssh's own).",
    ),
    option(
        "--accept-new-host-key",
        type="flag",
        help="Trust and record the host key of a board not yet in known_hosts (a CHANGED key is still refused).",
    ),
    option(
        "--connect-timeout",
        type="float",
        default=10.0,
        minimum=1,
        maximum=MAX_TIMEOUT,
        help="Seconds to wait for the SSH connection.",
    ),
    option(
        "--timeout",
        type="float",
        default=300.0,
        minimum=1,
        maximum=MAX_TIMEOUT,
        help="Seconds each remote step (listing, copying, running) may take.",
    ),
)

# ------------------------------------------------------------------------------ train
TRAIN = (
    option("--output", "-o", required=True, type="file", help="The model to write (.keras)."),
    option(
        "--arch",
        default="cnn",
        help="cnn, mobilenetv2, or module.py:function / package.module:function called "
        "as function(input_shape, num_classes).",
    ),
    option("--width", type="float", default=1.0, minimum=0.05, help="Width multiplier of mobilenetv2."),
    option("--epochs", type="int", default=10, minimum=1),
    option(
        "--batch-size",
        type="int",
        default=32,
        minimum=1,
        help="Per replica: the global batch is this times the replicas (TPU cores, GPUs).",
    ),
    option("--input-size", help="WIDTHxHEIGHT images are resized to (default: the first image's size)."),
    option(
        "--scaling",
        choices=("raw", "0..1", "-1..1"),
        default="0..1",
        help="Pixel scaling the model is trained with (recorded for quantize and classify).",
    ),
    option("--channels", choices=("RGB", "BGR", "L"), default="RGB"),
    option(
        "--validation-split",
        type="float",
        default=0.2,
        minimum=0.0,
        maximum=0.9,
        help="Share of each class held out for the per-epoch validation accuracy.",
    ),
    option("--learning-rate", type="float", default=2e-3, minimum=0.0, minimum_open=True),
    option("--seed", type="int", default=0),
    worded(TFRECORD_KEY, "Feature holding the encoded image in TFRecord examples (labels: image/class/label)."),
    option(
        "--worker-timeout",
        type="float",
        default=120.0,
        minimum=1,
        maximum=MAX_TIMEOUT,
        help="With TF_CONFIG: seconds for every worker to join the cluster, and for each step they share.",
    ),
)

# ------------------------------------------------------------------------------ quantize (and build)
QUANTIZE = (
    option(
        "--calib",
        help="Calibration data: an image folder (flat or one subfolder per class), .npy, .npz, "
        "TFRecord file(s), or 'random' (plumbing tests only). Default: the data recorded beside the model.",
    ),
    option(
        "--samples", type="int", default=300, minimum=1, help="Calibration samples (seeded, balanced across classes)."
    ),
    option(
        "--holdout",
        type="int",
        default=100,
        minimum=0,
        help="Samples held back from calibration to verify the int8 model on (a quarter of a smaller pool).",
    ),
    option("--seed", type="int", default=0, help="Seed for drawing the samples."),
    TFRECORD_KEY,
    ARCH,
    CUSTOM_OBJECTS,
    TRUST_MODEL,
    option(
        "--output-name",
        metavar="NAME",
        help="For a model with several outputs: the one to convert, by "
        "name (or index); recorded with the model. Without it such a model is refused (exit 5).",
    ),
    option(
        "--scaling",
        choices=("raw", "0..1", "-1..1"),
        help="Input scaling the model was trained with (default: from the model or its record, else "
        "measured on labelled calibration data).",
    ),
    worded(MEAN, "Mean subtracted from 0..255 pixels (one value or R,G,B); overrides --scaling."),
    worded(STD, "Std dividing the pixels after the mean (one value or R,G,B)."),
    option(
        "--resize",
        choices=("lanczos", "bilinear", "bicubic", "nearest", "box", "hamming", "keras"),
        help="Resize filter (default lanczos; keras: bilinear without antialias, as Keras pipelines and "
        "tf.image.resize train with).",
    ),
    option("--channels", choices=("RGB", "BGR", "L"), help="Channel order (default RGB, L for 1 channel)."),
    option("--input-size", help="WIDTHxHEIGHT, for models that accept any input size."),
    option("--io", choices=("uint8", "int8"), default="uint8", help="Input/output tensor type."),
    option(
        "--labels",
        type="file",
        help="Labels file to record with the model (class folders named "
        "like its lines are matched by name), or an Ultralytics data.yaml (its names).",
    ),
    option(
        "--eval",
        type="path",
        help="More labelled data (class folders, .npz, TFRecord) to verify the int8 model on, besides the "
        "held-back and calibration samples (build: its accuracy also goes into manifest.json); for a "
        "detector, a COCO .json or YOLO folder: the mAP50 drop is gated.",
    ),
    option(
        "--min-agreement",
        type="float",
        default=0.9,
        minimum=0.0,
        maximum=1.0,
        help="Fail (exit 6) when int8 top-1 agrees with float less often than this, beyond doubt (the "
        "whole 95% interval below it); when the data cannot tell, a warning if the estimate is below, "
        "else a note.",
    ),
    option(
        "--max-accuracy-drop",
        type="float",
        default=1.0,
        minimum=0.0,
        maximum=100.0,
        help="With labelled data: fail (exit 6) when int8 top-1 accuracy is more than this many points "
        "below float's, beyond doubt (the whole 95% interval above it); when the data cannot tell, a "
        "warning if the estimate is above, else a note.",
    ),
    option(
        "--strict",
        type="flag",
        help="Fail (exit 6) also when the data cannot tell but the estimate is past "
        "--min-agreement or --max-accuracy-drop (for CI); the message says how many samples would settle it.",
    ),
    option("--no-verify", type="flag", help="Skip comparing the int8 model with the float model."),
    LAYOUT,
    VERBOSE,
)

# ------------------------------------------------------------------------------ check, compile, cut, build
MIN_RUNTIME_CHECK = option(
    "--min-runtime",
    type="int",
    default=14,
    minimum=10,
    maximum=14,
    help="Lowest Edge TPU runtime to stay compatible with (edgetpu_compiler -m; compiler 16 defaults to 14).",
)
ALLOW_MULTIPLE_SUBGRAPHS = option(
    "--allow-multiple-subgraphs",
    "-a",
    type="flag",
    help="Compile with "
    "edgetpu_compiler -a (--enable_multiple_subgraphs, compiler 16): every mappable run "
    "of ops becomes its own Edge TPU subgraph.",
)
CHECK = (
    MIN_RUNTIME_CHECK,
    worded(
        ALLOW_MULTIPLE_SUBGRAPHS,
        "Predict a compile with edgetpu_compiler -a (--enable_multiple_subgraphs): "
        "every mappable run of ops becomes its own Edge TPU subgraph.",
    ),
    option(
        "--strict",
        type="flag",
        help="Exit 7 when any op is certain to stay on the CPU or the compiler "
        "would certainly refuse the model (a placement only an uncertain rule decides does not fail).",
    ),
)
COMPILE_TIMEOUT = option(
    "--timeout",
    type="float",
    default=180.0,
    minimum=1,
    maximum=MAX_TIMEOUT,
    help="Seconds before the compile is stopped.",
)
COMPILE_MIN_RUNTIME = option(
    "--min-runtime",
    type="int",
    minimum=10,
    maximum=14,
    help="Lowest Edge TPU runtime "
    "the model must run on (edgetpu_compiler -m; default: the compiler's own, 14 for "
    "compiler 16).",
)
COMPILE = (
    option(
        "--output-dir",
        "-o",
        type="dir",
        help="Folder for the compiled model and its .log (default: beside the input; created if missing).",
    ),
    COMPILE_MIN_RUNTIME,
    option("--segments", type="int", minimum=1, help="Split into N pipeline segments (edgetpu_compiler -n)."),
    option(
        "--search-delegate",
        type="flag",
        help="If the whole model fails, compile the largest leading part that works (edgetpu_compiler -d).",
    ),
    ALLOW_MULTIPLE_SUBGRAPHS,
    COMPILE_TIMEOUT,
)
CUT_OUTPUT = option(
    "-o", "--output", type="out-file", help="Where to write the cut model (default: <model>_cut.tflite beside it)."
)
BUILD_OUTPUT = option(
    "--output",
    "-o",
    required=True,
    type="path",
    help="The bundle folder to write (new, empty, or an edgekit bundle to replace: nothing else).",
)
# Compiling through a compiler elsewhere (compile and build): where, and the SSH options that apply to a host.
VIA = option(
    "--via",
    metavar="WHERE",
    help="Compile with the edgetpu_compiler of another machine: "
    "ssh://USER@HOST[:PORT] (an x86-64 Linux host with the compiler), or docker / podman (Coral's "
    "compiler 16.0 in a linux/amd64 image built from edgekit's recipe; emulated on ARM and macOS).",
)
# The SSH options that apply to --via ssh://, their help worded for the compile host (SSH's say "board").
_VIA_SSH_HELP = {
    "known_hosts": "known_hosts file to check the compile host's host key against (default: ssh's own).",
    "accept_new_host_key": "Trust and record the host key of a compile host not yet in known_hosts (a CHANGED key "
    "is still refused).",
    "connect_timeout": "Seconds to wait for the SSH connection to the compile host (--via ssh:// only).",
}
VIA_SSH = tuple(
    o._replace(help=_VIA_SSH_HELP.get(o.name, o.help))
    for o in SSH
    if o.name in ("identity", "known_hosts", "accept_new_host_key", "connect_timeout")
)
BUILD_COMPILE = (
    COMPILE_MIN_RUNTIME,
    COMPILE_TIMEOUT,
    option("--no-compile", type="flag", help="A CPU-only bundle, even where edgetpu_compiler exists."),
    VIA,
    *VIA_SSH,
)

# ------------------------------------------------------------------------------ classify, detect
CLASSIFY = (
    RUN_MODEL,
    LABELS,
    option("--top-k", "-k", type="int", default=5, minimum=1, help="Classes per image."),
    option(
        "--threshold",
        "-t",
        type="float",
        default=float("-inf"),
        show_default=False,
        help="Keep only scores >= this (default: keep all; a model without softmax has negative scores).",
    ),
)
DETECT = (
    worded(
        RUN_MODEL,
        "The detector .tflite (an *_edgetpu.tflite runs on the Edge TPU, or falls back to its CPU "
        "twin), or a bundle folder from edgekit build.",
    ),
    worded(LABELS, "Labels: '0 person', '0: person' or one per line (default: the model's metadata or record)."),
    option("--conf", type="float", default=0.25, help="Keep detections scoring at least this."),
    option(
        "--iou",
        type="float",
        default=0.45,
        help="Class-wise NMS: a box overlapping a better one of its class by more than this is dropped.",
    ),
    option("--max-det", type="int", default=100, help="Detections kept per image, best first."),
    worded(LAYOUT, "The output layout, when the model fits several (default: read from the model; never guessed)."),
    option(
        "--save",
        type="path",
        metavar="DIR",
        help="Write each image with its boxes drawn into DIR (same file name; never over an input).",
    ),
)

# ------------------------------------------------------------------------------ evaluate
EVALUATE = (
    worded(
        RUN_MODEL,
        "The .tflite model (an *_edgetpu.tflite runs on the Edge TPU, or falls back to its CPU "
        "twin), or a bundle folder from edgekit build (its compiled or CPU model by device, sha256-verified).",
    ),
    option(
        "--data",
        required=True,
        type="path",
        help="Labelled samples: a folder with one subfolder per class, or an .npz with x and y; for a "
        "detector, a COCO annotation file (.json) or a YOLO folder (images/ + labels/*.txt).",
    ),
    option(
        "--images",
        type="path",
        metavar="DIR",
        help="Detectors: the folder holding a COCO file's images (default: beside it, or its images/).",
    ),
    option(
        "--against",
        multiple=True,
        type="path",
        metavar="MODEL",
        help="Also run this .tflite (e.g. the float one) on the same samples: the change of -m against it, "
        "with a paired 95% interval (detectors: mAP50 and mAP50-95, bootstrap over images; classifiers: top-1, "
        "Tango's score interval and McNemar's exact test). Repeatable.",
    ),
    option(
        "--max-drop",
        type="float",
        minimum=0.0,
        maximum=100.0,
        metavar="POINTS",
        help="With --against: fail (exit 6) when -m is more than this many points below an --against model "
        "beyond doubt (the whole 95% interval above it): mAP50 and mAP50-95 for detectors, top-1 for "
        "classifiers; when the data cannot tell, a warning with the samples that would settle it.",
    ),
    option(
        "--plots",
        type="path",
        metavar="DIR",
        help="Write confusion_matrix.png (and for detectors pr_curve.png: precision-recall per class and "
        "all, from pycocotools) into DIR, each --against model beside -m; needs matplotlib "
        "(pip install matplotlib, or '.[plots]' in an edgekit checkout).",
    ),
    option(
        "--try-cut",
        type="flag",
        help="Detectors: where the model's YOLO decode runs inside it (evaluate then offers `edgekit cut`), cut "
        "it in memory and score the cut model on the same data too, with the paired change: one more "
        "evaluation, so only on request.",
    ),
    option("--conf", type="float", help="Detectors: score threshold (default 0.001, COCO's protocol)."),
    option("--iou", type="float", help="Detectors: NMS IoU (default 0.7, as Ultralytics' val)."),
    option("--max-det", type="int", help="Detectors: detections per image (default 100, COCO's protocol)."),
    worded(LAYOUT, "Detectors: the output layout, when the model fits several."),
    option(
        "--reference",
        type="path",
        help="The float Keras model (.keras, .h5, SavedModel) to compare with; needs TensorFlow.",
    ),
    option("--no-layers", type="flag", help="With --reference: skip the per-layer error report."),
    worded(LABELS, "Labels file (default: recorded with the model); class folders named as labels match by name."),
    worded(ARCH, "For a weights-only --reference: module.py:function that builds the model."),
    worded(CUSTOM_OBJECTS, "A .py file with the reference's custom layers."),
    worded(
        TRUST_MODEL, "Allow loading Lambda layers, and a SavedModel with file or system operations, in --reference."
    ),
)

# ------------------------------------------------------------------------------ benchmark
BENCHMARK = (
    RUN_MODEL,
    DEVICE,
    option("-n", name="n", type="int", default=100, minimum=1, help="Timed inferences."),
    option("--warmup", type="int", default=10, minimum=0, help="Untimed inferences after the first, before timing."),
    THREADS,
    option("--save", type="file", help="Write this run's JSON document to FILE."),
    option(
        "--compare",
        type="file",
        help="A file written by --save: exit 10 when p50 latency grew by more than --max-slowdown.",
    ),
    option(
        "--max-slowdown", type="float", default=20.0, minimum=0, help="Percent of p50 latency growth --compare allows."
    ),
    worded(
        ON,
        "Time it on a Coral Dev Board (or any board with python3) over SSH: deploys the bundle -m (or one "
        "made of the .tflite -m) when needed.",
    ),
)

MODEL = Argument("model", "path")
EXISTING_MODEL = Argument("model", "file")
IMAGES = Argument("images", nargs=-1)

#: Each command's arguments and options, in the order --help lists them; the commands in the order a Coral user
#: works (quantize, check, compile, classify), then the tools, as ``edgekit --help`` lists them.
COMMANDS: dict[str, tuple[Option | Argument, ...]] = {
    "train": (Argument("data", "path"), *TRAIN, JSON, QUIET),
    "quantize": (
        MODEL,
        *QUANTIZE,
        option("--output", "-o", type="file", help="Output .tflite (default <stem>_int8.tflite beside the input)."),
        JSON,
        QUIET,
    ),
    "check": (EXISTING_MODEL, *CHECK, JSON),
    "compile": (EXISTING_MODEL, *COMPILE, VIA, *VIA_SSH, JSON, QUIET),
    "cut": (EXISTING_MODEL, CUT_OUTPUT, JSON, QUIET),
    "build": (MODEL, BUILD_OUTPUT, *QUANTIZE, *BUILD_COMPILE, JSON, QUIET),
    "classify": (IMAGES, *CLASSIFY, DEVICE, MEAN, STD, THREADS, ON, *SSH, JSON, QUIET),
    "detect": (IMAGES, *DETECT, DEVICE, MEAN, STD, THREADS, ON, *SSH, JSON, QUIET),
    "evaluate": (
        *EVALUATE,
        DEVICE,
        MEAN,
        STD,
        THREADS,
        worded(VERBOSE, "Show TensorFlow's own log output (--reference)."),
        JSON,
        QUIET,
    ),
    "benchmark": (*BENCHMARK, *SSH, JSON, QUIET),
    "deploy": (
        Argument("bundle", "path"),
        option("--to", required=True, metavar="USER@HOST", help="The board, e.g. mendel@192.168.100.2."),
        *SSH,
        JSON,
        QUIET,
    ),
    "inspect": (EXISTING_MODEL, JSON),
    "devices": (JSON,),
    "doctor": (JSON,),
}


def declared(command: str, name: str) -> Option:
    """The option ``name`` (its Python name) of ``command``."""
    return next(o for o in COMMANDS[command] if isinstance(o, Option) and o.name == name)


def default(command: str, name: str) -> Any:
    """The default of ``command``'s option ``name``: what :mod:`edgekit.api` takes when the keyword is left out."""
    return declared(command, name).default
