"""Load a Keras image classifier from any format Keras has had, ready for a batch-1 conversion.

Formats: Keras 3 ``.keras``; legacy ``.h5`` full models (Keras 2 tf.keras/tf_keras or Keras 3);
weights-only ``.h5``/``.weights.h5`` plus an architecture function (``--arch``, the Colab pattern of
``tpu_model.save_weights`` and a ``create_model()`` rebuilt on the CPU); SavedModel directories
(Keras 2 ``model.save``, Keras 3 ``model.export``). A model built under a distribution strategy
loads on a plain CPU because nothing here enters a strategy scope.

Keras safe mode stays on unless the user passes ``--trust-model``: a Lambda layer stores Python
code in the file, and loading it would run that code.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.converters.tf_quiet import import_tensorflow, silenced
from edgekit.errors import ConversionError, InputError, MissingDependencyError, UsageError, first_line, regular_file
from edgekit.results.quantize import ModelOutput

KERAS_SUFFIXES = (".keras", ".h5", ".hdf5")
_SCALING_LAYERS = ("Rescaling", "Normalization")
# Layers that leave pixel values as they are at inference: augmentation (Random*) is off, resizing keeps the range.
_VALUE_PRESERVING_LAYERS = ("InputLayer", "Resizing", "CenterCrop")


@dataclass
class LoadedSource:
    """A float model that maps a float32 (N, H, W, C) batch to class scores."""

    path: Path
    format: str  # keras | h5 | weights+arch | savedmodel
    input_shape: tuple[int | None, int | None, int]  # (height, width, channels)
    call: Callable[[Any], Any]  # tf-traceable: float32 batch tensor -> scores tensor
    raw_pixel_input: bool | None = None  # a Rescaling/Normalization layer at the input (None: unknown)
    owner: Any = None  # the Keras model or loaded SavedModel that ``call`` uses
    fixed_batch: int | None = None  # a SavedModel signature with a static batch size
    output: ModelOutput | None = None  # the output chosen of several: its name, index, and all names
    notes: list[str] = field(default_factory=list)  # what loading changed (e.g. float16 weights made float32)

    def concrete_function(self, height: int, width: int) -> Any:
        """A concrete function with a static batch-1 input: the converter then writes static shapes."""
        tf = import_tensorflow()
        spec = tf.TensorSpec([1, height, width, self.input_shape[2]], tf.float32, name="input")
        return tf.function(self.call).get_concrete_function(spec)

    def predict(self, x: np.ndarray, batch_size: int = 64) -> np.ndarray:
        """Float scores for a preprocessed float32 batch."""
        tf = import_tensorflow()
        fn = getattr(self, "_predict_fn", None)
        if fn is None:
            fn = self._predict_fn = tf.function(self.call)
        step = self.fixed_batch or batch_size
        outs = []
        for i in range(0, len(x), step):
            chunk = x[i : i + step]
            if self.fixed_batch and len(chunk) < step:  # pad the last chunk to the static batch
                chunk = np.concatenate([chunk, np.zeros((step - len(chunk),) + chunk.shape[1:], chunk.dtype)])
            outs.append(np.asarray(fn(tf.constant(chunk, tf.float32)))[: len(x) - i])
        return np.concatenate(outs).reshape(len(x), -1)


def default_output_stem(path: str | Path) -> str:
    """``model.h5`` → ``model``, ``model.weights.h5`` → ``model``, ``saved_model_dir/`` → ``saved_model_dir``."""
    p = Path(path)
    name = p.resolve().name if p.is_dir() else p.stem  # resolved: `.` names its folder
    return name.removesuffix(".weights")


def load(
    path: str | Path,
    arch: str | None = None,
    custom_objects: str | None = None,
    trust_model: bool = False,
    verbose: bool = False,
    output: str | None = None,
) -> LoadedSource:
    """Load a Keras model or SavedModel from ``path`` (see the module docstring for formats).

    ``output`` chooses one output (by name, or by index) of a model with several (``--output-name``);
    a model with several outputs and no choice is refused, never cut to its first output.
    """
    p = Path(path)
    if not p.exists():
        raise InputError(f"no such file or directory: {p}", "check the model path")
    regular_file(p)
    if p.is_dir():
        if not (p / "saved_model.pb").is_file() and not (p / "saved_model.pbtxt").is_file():
            raise InputError(
                f"{p} is a directory but not a SavedModel (no saved_model.pb in it)",
                "pass a .keras or .h5 file, or a SavedModel directory",
            )
        if arch:
            raise UsageError(
                "--arch applies to weights-only .h5 files, not to a SavedModel directory", "leave out --arch"
            )
        return _load_saved_model(p, verbose, trust_model, output)
    suffix = p.suffix.lower()
    if suffix == ".tflite":
        raise InputError(f"{p} is already a TFLite model", "use `edgekit inspect` or `edgekit check` on it")
    if suffix not in KERAS_SUFFIXES:
        raise InputError(
            f"{p}: unsupported model format {suffix or '(no suffix)'!r}",
            "pass a Keras .keras or .h5 file, a weights-only .h5 with --arch, or a SavedModel directory",
        )
    kind = _sniff(p, verbose)
    extra = _custom_objects(custom_objects, verbose) if custom_objects else {}
    if kind == "weights":
        if not arch:
            raise UsageError(
                f"{p} holds only weights (no architecture)",
                "pass the function that builds the model: --arch model_def.py:create_model "
                "or --arch package.module:create_model",
            )
        model = _build_arch(arch, verbose)
        _load_weights(model, p, verbose)
        model, notes = as_float32(model, extra, trust_model, verbose)
        return _from_keras(p, "weights+arch", model, output, notes)
    if arch:
        raise UsageError(
            f"{p} is a full model (it has its architecture); --arch is only for weights-only files", "leave out --arch"
        )
    model = _load_full(p, extra, trust_model, verbose)
    model, notes = as_float32(model, extra, trust_model, verbose)
    return _from_keras(p, "keras" if kind == "keras" else "h5", model, output, notes)


# ------------------------------------------------------------------------------------------ sniffing
def _sniff(p: Path, verbose: bool = False) -> str:
    """keras (a .keras zip with a config) | full (HDF5 with model_config) | weights (HDF5 without)."""
    if p.suffix.lower() == ".keras":
        if not zipfile.is_zipfile(p):
            raise InputError(
                f"{p}: not a valid .keras file (not a zip archive; damaged or truncated?)",
                "save the model again with model.save('model.keras'), or copy it again",
            )
        with zipfile.ZipFile(p) as z:
            names = set(z.namelist())
        if "config.json" not in names:
            raise InputError(
                f"{p}: not a valid .keras file (no config.json inside)",
                "save the model again with model.save('model.keras')",
            )
        return "keras"
    try:
        import h5py
    except ImportError:  # the light install (no TensorFlow, which brings h5py): say what to install
        import_tensorflow(verbose)
        raise MissingDependencyError("h5py is needed to read .h5 models", "pip install h5py") from None

    try:
        with h5py.File(p, "r") as f:
            return "full" if "model_config" in f.attrs else "weights"
    except OSError as exc:
        raise InputError(
            f"{p}: not a valid HDF5 file ({first_line(exc)}; damaged or truncated?)",
            "save the model again with model.save('model.h5'), or copy it again",
        ) from None


def _custom_objects(module_path: str, verbose: bool) -> dict[str, Callable[..., Any]]:
    """Classes and functions a user module defines (or its CUSTOM_OBJECTS dict), for deserialization."""
    import_tensorflow(verbose)  # quietly, before the module's own `import keras` would, noisily
    module = _import_user_module(module_path, "--custom-objects")
    explicit = getattr(module, "CUSTOM_OBJECTS", None)
    if isinstance(explicit, dict):
        return dict(explicit)
    return {
        name: obj
        for name, obj in vars(module).items()
        if (inspect.isclass(obj) or inspect.isfunction(obj)) and getattr(obj, "__module__", None) == module.__name__
    }


def _import_user_module(spec: str, flag: str) -> Any:
    """Import ``file.py`` or ``package.module`` (the current directory is importable)."""
    try:
        if spec.endswith(".py"):
            file = Path(spec)
            if not file.is_file():
                raise InputError(f"{flag}: no such file {file}", "check the path to the .py file")
            sys.path.insert(0, str(file.resolve().parent))
            name = f"_edgekit_user_{file.stem}"
            mod_spec = importlib.util.spec_from_file_location(name, file)
            if mod_spec is None or mod_spec.loader is None:  # a .py file always has both
                raise InputError(f"{flag}: Python cannot import {file}", "check the path to the .py file")
            module = importlib.util.module_from_spec(mod_spec)
            sys.modules[name] = module
            mod_spec.loader.exec_module(module)
            return module
        if "." not in sys.path and "" not in sys.path:
            sys.path.insert(0, "")
        return importlib.import_module(spec)
    except InputError:
        raise
    except ModuleNotFoundError as exc:
        raise InputError(
            f"{flag}: cannot import {spec!r} ({exc})", "give a path to a .py file or an importable package.module"
        ) from None
    except Exception as exc:  # the user's code failed while importing
        shows = f"python {spec}" if spec.endswith(".py") else f"python -c 'import {spec}'"
        raise InputError(
            f"{flag}: importing {spec!r} failed: {type(exc).__name__}: {first_line(exc)}",
            f"fix the error in {spec}; `{shows}` shows its traceback",
        ) from None


def _build_arch(arch: str, verbose: bool) -> Any:
    if ":" not in arch:
        raise UsageError(
            f"--arch {arch!r} does not name a function",
            "use --arch model_def.py:create_model or --arch package.module:create_model",
        )
    import_tensorflow(verbose)
    with silenced(verbose):
        return call_arch(arch)


def call_arch(arch: str, args: tuple[Any, ...] = (), arg_names: str = "") -> Any:
    """Import ``module.py:function`` / ``package.module:function`` (``--arch``), call it with ``args`` and check
    that it returned a Keras model. ``arg_names`` names the arguments in messages ("input_shape, num_classes")."""
    where, func_name = arch.rsplit(":", 1)
    module = _import_user_module(where, "--arch")
    fn = getattr(module, func_name, None)
    if not callable(fn):
        raise UsageError(
            f"--arch: {where} has no function {func_name!r}",
            f"name a function defined in {where}: --arch {where}:create_model",
        )
    try:
        model = fn(*args)
    except Exception as exc:
        raise InputError(
            f"--arch: {arch}({arg_names}) failed: {type(exc).__name__}: {first_line(exc)}",
            f"fix the error in {where}; calling {func_name}({arg_names}) in Python shows its traceback",
        ) from None
    if not hasattr(model, "load_weights") or not hasattr(model, "inputs"):
        raise UsageError(
            f"--arch: {arch}() returned {type(model).__name__}, not a Keras model",
            f"make {func_name}() return the keras.Model it builds",
        )
    return model


def _mismatch_layer(message: str) -> str | None:
    for pattern in (
        r"object <\w+ name=([^,>\s]+)",
        r"named ([\w./-]+)",
        r"[Ll]ayer ['\"]([^'\"]+)['\"]",
        r"Variable path=([\w-]+)/",
    ):
        m = re.search(pattern, message)
        if m:
            return m.group(1)
    return None


def _load_weights(model: Any, p: Path, verbose: bool) -> None:
    import h5py

    with h5py.File(p, "r") as f:
        legacy = "layer_names" in f.attrs  # the Keras 2 (and Keras 3 legacy) layout
    target = p
    with tempfile.TemporaryDirectory() as tmp:
        # Keras 3 picks its reader by name: `.weights.h5` means the new layout, other `.h5` the legacy one.
        if legacy and p.name.endswith(".weights.h5"):
            target = Path(tmp) / "weights.h5"
            target.symlink_to(p.resolve())
        elif not legacy and not p.name.endswith(".weights.h5"):
            target = Path(tmp) / "model.weights.h5"
            target.symlink_to(p.resolve())
        try:
            with silenced(verbose):
                model.load_weights(str(target))
        except (ValueError, KeyError, TypeError) as exc:
            layer = _mismatch_layer(str(exc))
            where = f" at layer {layer!r}" if layer else ""
            raise InputError(
                f"{p}: the weights do not fit the --arch model{where}: {first_line(exc, 200)}",
                "--arch must build exactly the architecture the weights were saved from",
            ) from None


def _load_full(p: Path, custom: dict[str, Callable[..., Any]], trust_model: bool, verbose: bool) -> Any:
    import_tensorflow(verbose)
    import keras

    try:
        with silenced(verbose):
            return keras.models.load_model(
                str(p), compile=False, safe_mode=not trust_model, custom_objects=custom or None
            )
    except Exception as exc:  # Keras raises ValueError/TypeError/KeyError/OSError for all of these
        text = str(exc)
        if "Lambda" in text and "safe_mode" in text:
            raise InputError(
                f"{p} contains a Lambda layer: loading it would run Python code stored in the file",
                "only if you trust where the file came from, pass --trust-model",
            ) from None
        m = re.search(r"(?:Could not locate (?:class|function)|Unknown (?:layer|object|class)):? ['\"]?([\w.]+)", text)
        if m:
            raise InputError(
                f"{p} needs the custom class or function {m.group(1)!r} to load",
                "pass the module that defines it: --custom-objects my_layers.py",
            ) from None
        raise InputError(
            f"{p}: Keras could not load the model: {first_line(exc)}",
            "save it again with the Keras that trained it (model.save('model.keras')); --debug shows Keras's traceback",
        ) from None


# ------------------------------------------------------------------------------------------ wrapping
def _input_shape(shape: Any, p: Path) -> tuple[int | None, int | None, int]:
    """(height, width, channels) of an (N, H, W, 1 or 3) input; (N, H, W) is grayscale without a channel axis."""
    dims = list(shape)
    if len(dims) == 3:
        dims.append(1)
    if len(dims) != 4 or dims[-1] not in (1, 3):
        raise ConversionError(
            f"{p}: input shape {tuple(shape)} is not an image batch (N, H, W, 1 or 3)",
            "edgekit quantize handles image classifiers with one HxWx1 or HxWx3 input",
        )
    h, w = (None if d is None else int(d) for d in dims[1:3])
    return h, w, int(dims[3])


def _drop_channel_axis(shape: Any, call: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """For an (N, H, W) input (the Keras MNIST tutorials' models): the int8 model takes (1, H, W, 1) like any
    grayscale model, and the channel axis is dropped before the Keras model sees the batch."""
    if len(shape) != 3:
        return call
    return lambda x: call(x[..., 0])


def _flat_layers(model: Any) -> Iterator[Any]:
    """The model's layers in order, nested models (e.g. a data_augmentation Sequential) opened up."""
    for layer in getattr(model, "layers", []):
        if hasattr(layer, "layers"):
            yield from _flat_layers(layer)
        else:
            yield layer


def _has_scaling_layer(model: Any) -> bool:
    """True when the first layer that changes pixel values rescales or normalizes them (the model takes raw pixels).

    Augmentation and resizing layers in front (the Keras tutorials' ``data_augmentation``) are looked past.
    """
    for layer in _flat_layers(model):
        name = type(layer).__name__
        if name in _VALUE_PRESERVING_LAYERS or name.startswith("Random"):
            continue
        return name in _SCALING_LAYERS
    return False


def _no_output_chosen(names: list[str], where: Any) -> ConversionError:
    listed = ", ".join(names)
    return ConversionError(
        f"{where}: the model has {len(names)} outputs ({listed}); an Edge TPU classifier has one",
        f"choose the classifier's output with --output-name NAME (one of {listed})",
    )


def choose_output(names: list[str], output: str | None, where: Any) -> int | None:
    """The index of the output to convert among ``names`` (None: the model has one output).

    ``output`` is a name, or an index where no output has that name. Several outputs and no choice:
    ConversionError naming the outputs and the option, never a silent cut to the first one.
    """
    if len(names) <= 1:
        if output is not None and names and output not in (names[0], "0"):
            raise UsageError(
                f"--output-name {output}: the model has one output, {names[0]!r}", "leave out --output-name"
            )
        return None
    listed = ", ".join(names)
    if output is None:
        raise _no_output_chosen(names, where)
    if output in names:
        return names.index(output)
    if output.isdigit() and int(output) < len(names):
        return int(output)
    raise UsageError(
        f"--output-name {output}: the model has no output of that name (its outputs: {listed})",
        f"pass one of {listed}, or an index 0 to {len(names) - 1}",
    )


def _keras_output_names(model: Any) -> list[str] | None:
    """Names of a Keras model's outputs in the order they come out (dict keys for a dict output); None: unknown."""
    struct = getattr(model, "_outputs_struct", None)  # Keras 3 Functional: the structure the model returns
    if isinstance(struct, dict):
        return [str(k) for k in struct]
    outputs = getattr(model, "outputs", None)
    if not outputs:
        return None  # a subclassed model: told when it is called
    names = list(getattr(model, "output_names", None) or [])
    return [str(n) for n in names] if len(names) == len(outputs) else [f"output_{i}" for i in range(len(outputs))]


def _pick(out: Any, index: int | None, names: list[str] | None, where: Any) -> Any:
    """The chosen output of what a model returned (its only one when it returns one)."""
    if isinstance(out, dict):
        keys = list(out)
        if len(keys) == 1:
            return out[keys[0]]
        if index is None:
            raise _no_output_chosen([str(k) for k in keys], where)
        key = names[index] if names and names[index] in out else keys[index]
        return out[key]
    if isinstance(out, (list, tuple)):
        if len(out) == 1:
            return out[0]
        if index is None:
            raise _no_output_chosen([f"output_{i}" for i in range(len(out))], where)
        return out[index]
    return out


def _from_keras(
    p: Path, fmt: str, model: Any, output: str | None = None, notes: list[str] | None = None
) -> LoadedSource:
    inputs = getattr(model, "inputs", None) or []
    if len(inputs) != 1:
        raise ConversionError(
            f"{p}: the model has {len(inputs)} inputs; edgekit quantize handles one image input",
            "save the image classifier alone, as a model with one (N, H, W, C) input",
        )
    names = _keras_output_names(model)
    index = choose_output(names, output, p) if names is not None else None
    if names is None and output is not None:
        index = int(output) if output.isdigit() else None
        if index is None:
            raise UsageError(
                f"--output-name {output}: this model does not name its outputs",
                "choose the output by its index: --output-name 0",
            )

    def call(x: Any) -> Any:
        return _pick(model(x, training=False), index, names, p)

    shape = inputs[0].shape
    chosen = (
        None
        if index is None
        else ModelOutput(names[index] if names else str(index), index, tuple(names) if names is not None else None)
    )
    return LoadedSource(
        p,
        fmt,
        _input_shape(shape, p),
        _drop_channel_axis(shape, call),
        _has_scaling_layer(model),
        model,
        output=chosen,
        notes=list(notes or []),
    )


#: Ops that reach outside the graph: files (read, write, list, map into memory, summaries, debug dumps to file://
#: URLs, dataset readers and writers, lookup tables from text files), Python code (py_func), the network (RPC) and
#: cloud credentials. A serving function has no use for them; a hostile SavedModel uses them to read or write the
#: user's files when edgekit traces and runs its graph (quantize's conversion and calibration).
SYSTEM_OPS = frozenset(
    {
        "ReadFile",
        "WriteFile",
        "MatchingFiles",
        "ImmutableConst",
        "PyFunc",
        "PyFuncStateless",
        "EagerPyFunc",
        "DebugIdentity",
        "DebugIdentityV2",
        "DebugIdentityV3",
        "DebugNanCount",
        "DebugNumericSummary",
        "WholeFileReader",
        "WholeFileReaderV2",
        "TextLineReader",
        "TextLineReaderV2",
        "FixedLengthRecordReader",
        "FixedLengthRecordReaderV2",
        "TFRecordReader",
        "TFRecordReaderV2",
        "IdentityReader",
        "IdentityReaderV2",
        "LMDBReader",
        "ReaderRead",
        "ReaderReadV2",
        "ReaderReadUpTo",
        "ReaderReadUpToV2",
        "ReaderRestoreState",
        "ReaderRestoreStateV2",
        "ReaderSerializeState",
        "ReaderSerializeStateV2",
        "TFRecordDataset",
        "TFRecordDatasetV2",
        "TextLineDataset",
        "FixedLengthRecordDataset",
        "FixedLengthRecordDatasetV2",
        "MatchingFilesDataset",
        "ExperimentalMatchingFilesDataset",
        "CSVDataset",
        "CSVDatasetV2",
        "ExperimentalCSVDataset",
        "LMDBDataset",
        "ExperimentalLMDBDataset",
        "SqlDataset",
        "ExperimentalSqlDataset",
        "SaveDataset",
        "SaveDatasetV2",
        "LoadDataset",
        "DatasetToTFRecord",
        "ExperimentalDatasetToTFRecord",
        "SnapshotDataset",
        "SnapshotDatasetV2",
        "SnapshotDatasetReader",
        "SnapshotChunkDataset",
        "SnapshotNestedDatasetReader",
        "CacheDataset",
        "CacheDatasetV2",
        "InitializeTableFromTextFile",
        "InitializeTableFromTextFileV2",
        "LoadAndRemapMatrix",
        "GenerateVocabRemapping",
        "CreateSummaryFileWriter",
        "CreateSummaryDbWriter",
        "WriteSummary",
        "WriteRawProtoSummary",
        "WriteScalarSummary",
        "WriteHistogramSummary",
        "WriteImageSummary",
        "WriteAudioSummary",
        "WriteGraphSummary",
        "ImportEvent",
        "FlushSummaryWriter",
        "CloseSummaryWriter",
        "SummaryWriter",
        "Rpc",
        "TryRpc",
        "RpcClient",
        "RpcServer",
        "RpcServerStart",
        "RpcServerRegister",
        "RpcCall",
        "RpcCheckStatus",
        "RpcGetValue",
        "DeleteRpcFutureResource",
        "GcsConfigureCredentials",
        "GcsConfigureBlockCache",
        "BigQueryReader",
        "GenerateBigQueryReaderPartitions",
        "DecodeProtoV2",
        "EncodeProto",
    }
)
#: Checkpoint ops: every SavedModel's own save and restore functions (those its saver_def names) hold them, and
#: nothing else should.
CHECKPOINT_OPS = frozenset(
    {"SaveV2", "Save", "SaveSlices", "RestoreV2", "Restore", "RestoreSlice", "MergeV2Checkpoints"}
)


def saved_model_system_ops(folder: Path) -> dict[str, list[str]]:
    """The file, system and Python ops in a SavedModel's graph and function library, read from saved_model.pb
    (or .pbtxt) as data, never loaded or run: {op type: [where: "graph" or a function's name]}. Checkpoint ops
    count outside the saver_def's save and restore functions only.
    """
    from google.protobuf import message, text_format
    from tensorflow.core.protobuf import saved_model_pb2

    sm = saved_model_pb2.SavedModel()
    pb, pbtxt = folder / "saved_model.pb", folder / "saved_model.pbtxt"
    try:
        if pb.is_file():
            regular_file(pb)
            sm.ParseFromString(pb.read_bytes())
        else:
            regular_file(pbtxt)
            text_format.Parse(pbtxt.read_text(encoding="utf-8"), sm)
    except (message.DecodeError, text_format.ParseError, UnicodeDecodeError, RecursionError, ValueError) as exc:
        raise InputError(
            f"{folder}: TensorFlow could not load the SavedModel: its saved_model.pb does not parse "
            f"({first_line(exc, 200)})",
            "export it again (model.export(dir) in Keras 3, model.save(dir) in Keras 2)",
        ) from None
    except OSError as exc:
        raise InputError(
            f"{folder}: cannot read saved_model.pb ({exc.strerror or exc})", "check the file's permissions"
        ) from None
    found: dict[str, list[str]] = {}

    def called(node: Any) -> Iterator[str]:
        """The library functions a node calls: as its op, or through func attributes (If, While, PartitionedCall)."""
        yield node.op
        for value in node.attr.values():
            if value.HasField("func"):
                yield value.func.name
            yield from (f.name for f in value.list.func)

    for mg in sm.meta_graphs:
        library = {f.signature.name: f for f in mg.graph_def.library.function}
        saver_nodes = {mg.saver_def.save_tensor_name.split(":")[0], mg.saver_def.restore_op_name.split(":")[0]} - {""}
        saver: set[str] = set()  # the functions the saver's save and restore nodes call, transitively
        todo = [name for n in mg.graph_def.node if n.name in saver_nodes for name in called(n) if name in library]
        while todo:
            name = todo.pop()
            if name not in saver:
                saver.add(name)
                todo += [c for n in library[name].node_def for c in called(n) if c in library]

        def look(nodes: Any, where: str, checkpoint_ok: bool) -> None:
            for n in nodes:
                to_file = n.op == "PrintV2" and n.attr["output_stream"].s.startswith(b"file://")  # tf.print(...,
                if n.op in SYSTEM_OPS or to_file or (n.op in CHECKPOINT_OPS and not checkpoint_ok):  # to a file)
                    places = found.setdefault(n.op, [])
                    if where not in places:
                        places.append(where)

        look((n for n in mg.graph_def.node if n.name not in saver_nodes), "graph", False)
        for name, f in library.items():
            look(f.node_def, name, name in saver)
    return found


def _refuse_system_ops(p: Path) -> None:
    """InputError unless the SavedModel's graph is free of file, system and Python ops (see SYSTEM_OPS)."""
    found = saved_model_system_ops(p)
    if found:
        ops = ", ".join(
            f"{op} (in {places[0]}{' and more' if len(places) > 1 else ''})" for op, places in sorted(found.items())
        )
        raise InputError(
            f"{p}: the SavedModel's graph has file, system or Python operations that converting it would run: {ops}",
            "a SavedModel is a program: only if you trust where it came from, pass --trust-model; "
            "else export the model again without them (or pass its .keras/.h5 file)",
        )


# ------------------------------------------------------------------------------------------ float16
_HALF = ("float16", "bfloat16", "mixed_float16", "mixed_bfloat16")


def _half_dtype(value: Any) -> bool:
    """A layer config's ``dtype``: a half-precision dtype or policy name, or a serialized DTypePolicy of one."""
    if isinstance(value, str):
        return value in _HALF
    if isinstance(value, dict):
        return str((value.get("config") or {}).get("name", "")) in _HALF
    return False


def _to_float32(config: Any) -> Any:
    """The serialized model with every half-precision ``dtype`` (policy, layer or tensor) set to float32."""
    if isinstance(config, dict):
        return {k: ("float32" if k == "dtype" and _half_dtype(v) else _to_float32(v)) for k, v in config.items()}
    if isinstance(config, list):
        return [_to_float32(v) for v in config]
    return config


def half_precision(model: Any) -> str | None:
    """The half-precision policy or dtype a Keras model computes or stores in (None: float32 throughout)."""
    for layer in _flat_layers(model):
        policy = getattr(layer, "dtype_policy", None)
        name = str(getattr(policy, "name", "") or "")
        if name in _HALF:
            return name
    for w in getattr(model, "weights", []):
        dtype = str(getattr(w, "dtype", ""))
        if dtype in _HALF:
            return dtype
    return None


def as_float32(
    model: Any, custom: dict[str, Callable[..., Any]], trust_model: bool, verbose: bool
) -> tuple[Any, list[str]]:
    """A float16 / mixed-precision model rebuilt in float32 with its weights cast (the int8 converter's input).

    TensorFlow's int8 converter fails on float16 compute (an MLIR dump, not a reason): the model is cloned
    from its config with every dtype policy set to float32, and each weight copied as float32. Returns
    (model, notes); a float32 model is returned as it is.
    """
    half = half_precision(model)
    if half is None:
        return model, []
    import keras

    try:
        with silenced(verbose):
            config = _to_float32(keras.saving.serialize_keras_object(model))
            clone = keras.saving.deserialize_keras_object(
                config, custom_objects=custom or None, safe_mode=not trust_model
            )
            weights = model.get_weights()
            clone.set_weights([np.asarray(w, np.float32) if np.asarray(w).dtype.kind == "f" else w for w in weights])
    except Exception as exc:
        raise ConversionError(
            f"the model computes in {half}, and rebuilding it in float32 failed: "
            f"{type(exc).__name__}: {first_line(exc, 200)}",
            "save it again in float32: keras.mixed_precision.set_global_policy('float32'), "
            "rebuild the model, model.set_weights(trained.get_weights()), save",
        ) from None
    if half_precision(clone) is not None:
        raise ConversionError(
            f"the model computes in {half} and could not be rebuilt in float32",
            "save it again in float32 (set the global policy to float32, rebuild, copy weights)",
        )
    return clone, [
        f"the model computes in {half}: loaded as float32 (weights cast; int8 quantization starts from float32)"
    ]


def _load_saved_model(p: Path, verbose: bool, trust_model: bool = False, output: str | None = None) -> LoadedSource:
    tf = import_tensorflow(verbose)
    if not trust_model:
        _refuse_system_ops(p)  # read as data before TensorFlow loads it: loading runs its initializers
    try:
        with silenced(verbose):
            obj = tf.saved_model.load(str(p))
    except Exception as exc:
        raise InputError(
            f"{p}: TensorFlow could not load the SavedModel: {first_line(exc)}",
            "export it again (model.export(dir) in Keras 3, model.save(dir) in Keras 2), or pass the .keras/.h5 file",
        ) from None
    signatures = dict(getattr(obj, "signatures", {}) or {})
    if not signatures:
        raise InputError(
            f"{p}: the SavedModel has no serving signature",
            "save it with model.export(dir) (Keras 3) or model.save(dir) (Keras 2)",
        )
    sig = signatures.get("serving_default") or signatures[sorted(signatures)[0]]
    specs = sig.structured_input_signature[1]
    if len(specs) != 1:
        raise ConversionError(
            f"{p}: the serving signature has {len(specs)} inputs; edgekit quantize handles one image input",
            "export the image classifier alone, with one (N, H, W, C) input",
        )
    ((name, spec),) = specs.items()
    outputs = sig.structured_outputs
    names = sorted(outputs) if isinstance(outputs, dict) else None
    index = choose_output(names, output, p) if names else None
    key = names[index if index is not None else 0] if names else None

    def call(x: Any) -> Any:
        out = sig(**{name: x})
        return out[key] if isinstance(out, dict) else out

    batch = spec.shape[0] if len(spec.shape) else None
    if batch not in (None, 1):
        raise ConversionError(
            f"{p}: the serving signature takes a fixed batch of {batch}; the Edge TPU needs 1",
            "export it again with a batch of 1 or None, e.g. model.export(dir)",
        )
    # owner=obj keeps the SavedModel's variables alive while its functions are used
    chosen = ModelOutput(key, index, tuple(names)) if index is not None and key is not None and names else None
    return LoadedSource(
        p,
        "savedmodel",
        _input_shape(spec.shape, p),
        _drop_channel_axis(spec.shape, call),
        None,
        owner=obj,
        fixed_batch=batch,
        output=chosen,
    )
