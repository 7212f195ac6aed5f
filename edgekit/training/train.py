"""``edgekit train``: a Keras classifier trained on an image folder or TFRecords, ready for ``edgekit quantize``.

The input pipeline is tf.data: parallel decode, cache, shuffle, batch, prefetch (AUTOTUNE). Each image
goes through edgekit's one preprocessing: decoding, channel order and resizing are
:func:`edgekit.board.preprocess.pixels` itself (called through ``tf.numpy_function``; Pillow releases the GIL,
so the parallel map decodes in parallel), and the normalization ``(pixels - mean) / std`` runs in
TensorFlow on the batch, computing in float32 what :func:`edgekit.board.preprocess.to_float` computes (a
test checks they agree exactly). The spec and the labels (class folder names, sorted as Keras sorts
them) are recorded beside the model, so ``edgekit quantize model.keras`` needs no flags.

The model is built and compiled inside the strategy :mod:`edgekit.training.strategy` picks, the
global batch is the per-replica batch times the replicas, and on a TPU ``steps_per_execution`` runs
several steps per call (TensorFlow's TPU guide: it keeps the TPU busy between host round trips).
"""

from __future__ import annotations

import io
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from edgekit import __version__
from edgekit.board.preprocess import PreprocessSpec, open_image, pixels
from edgekit.errors import DeviceError, InputError, UsageError, first_line
from edgekit.report import SILENT, Reporter
from edgekit.results.train import Epoch, TrainData, TrainPreprocess, TrainResult
from edgekit.tflite.model_record import ModelRecord, sidecar_path

CREATED_BY = "edgekit train"
TPU_STEPS_PER_EXECUTION = 32
#: The largest image side train takes: an Edge TPU classifier's input is a few hundred pixels (its whole
#: on-chip memory is 8 MiB), and a bigger one only exhausts the host's memory (or takes for ever) first.
MAX_INPUT_SIDE = 4096
DEFAULT_TFRECORD_LABEL_KEY = "image/class/label"


@dataclass
class TrainOptions:
    data: str
    output: str
    arch: str = "cnn"
    width: float = 1.0  # mobilenetv2's width multiplier
    epochs: int = 10
    batch_size: int = 32  # per replica
    input_size: tuple[int, int] | None = None  # (width, height); default: the first image's size
    scaling: str = "0..1"
    channels: str = "RGB"
    validation_split: float = 0.2
    learning_rate: float = 2e-3
    seed: int = 0
    tfrecord_key: str = "image/encoded"
    worker_timeout: float = 120.0  # TF_CONFIG clusters: seconds for the workers to join (and each collective)
    show_progress: bool = True
    report: Reporter = SILENT  # the strategy line (a note) and advice (warnings); epoch lines go to stderr


@dataclass
class TrainingData:
    """The examples of DATA: image paths (folders) or serialized tf.train.Example bytes (TFRecords)."""

    source: str
    kind: str  # images | tfrecord
    items: list[Any]  # paths, or encoded image bytes
    labels: np.ndarray
    class_names: list[str]
    first_size: tuple[int, int] = (0, 0)
    empty_classes: tuple[str, ...] = ()  # class folders with no image in them (left out: said as a warning)

    def split(self, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """(train indices, validation indices): ``fraction`` of each class held out, seeded."""
        rng = np.random.default_rng(seed)
        train, val = [], []
        for k in range(len(self.class_names)):
            idx = np.flatnonzero(self.labels == k)
            rng.shuffle(idx)
            n_val = int(round(len(idx) * fraction)) if len(idx) > 1 else 0
            val += list(idx[:n_val])
            train += list(idx[n_val:])
        return np.asarray(sorted(train), np.int64), np.asarray(sorted(val), np.int64)


def read_data(source: str, tfrecord_key: str = "image/encoded") -> TrainingData:
    """A class-folder image set, or TFRecord file(s) of tf.train.Example with an encoded image and an int label."""
    from edgekit.converters import calibration
    from edgekit.data.labelled import list_images

    if not Path(source).exists() and not calibration.is_glob(source):
        raise InputError(f"DATA {source} does not exist", "pass a folder with one subfolder per class, or TFRecords")
    if calibration.is_tfrecord(source):
        return _read_tfrecords(source, tfrecord_key)
    if not Path(source).is_dir():
        raise InputError(
            f"DATA {source} is neither a folder of class folders nor TFRecord files",
            "pass a folder with one subfolder of images per class, or .tfrecord files",
        )
    groups, classes = list_images(Path(source), "DATA")
    if classes is None or len(classes) < 2:
        raise InputError(
            f"DATA {source}: training needs one subfolder per class, at least two",
            "put each class's images in a folder named after the class",
        )
    items = [str(p) for g in groups for p in g]
    labels = np.concatenate([np.full(len(g), k, np.int64) for k, g in enumerate(groups)])
    first = open_image(items[0])
    _check_headers(source, items)
    empty = tuple(
        sorted(
            d.name
            for d in Path(source).iterdir()
            if d.is_dir() and not d.name.startswith(".") and d.name not in classes
        )
    )
    return TrainingData(source, "images", items, labels, classes, first.size, empty)


def _check_headers(source: str, items: list[str]) -> None:
    """Every file must at least open as an image (its header: fast) before training starts.

    A file that does not decode otherwise surfaces minutes later inside TensorFlow's input threads.
    """
    from edgekit.board.preprocess import image_size

    for item in items:
        try:
            image_size(item)
        except InputError as exc:
            raise InputError(f"DATA {source}: {exc.message}", "remove or replace that file, then train again") from None


def _read_tfrecords(source: str, key: str) -> TrainingData:
    from edgekit.converters import calibration
    from edgekit.converters.tf_quiet import import_tensorflow

    tf = import_tensorflow()
    files = calibration.tfrecord_files(source)
    items, labels = [], []
    try:
        for raw in tf.data.TFRecordDataset(files):
            ex = tf.train.Example.FromString(raw.numpy()).features.feature
            if key not in ex or DEFAULT_TFRECORD_LABEL_KEY not in ex:
                raise InputError(
                    f"DATA {source}: a TFRecord example lacks {key!r} or {DEFAULT_TFRECORD_LABEL_KEY!r} "
                    f"(features present: {', '.join(sorted(ex)) or 'none'})",
                    "name the image feature with --tfrecord-key; labels must be int64 class ids",
                )
            items.append(ex[key].bytes_list.value[0])
            labels.append(int(ex[DEFAULT_TFRECORD_LABEL_KEY].int64_list.value[0]))
    except tf.errors.OpError as exc:
        raise InputError(
            f"DATA {source}: cannot read TFRecord: {first_line(exc)}",
            "pass TFRecord files of tf.train.Example records, or a folder of class subfolders",
        ) from None
    if not items:
        raise InputError(
            f"DATA {source}: the TFRecord files hold no examples",
            "write tf.train.Example records with the image and its class id",
        )
    y = np.asarray(labels, np.int64)
    if y.min() < 0:
        raise InputError(
            f"DATA {source}: negative class id {int(y.min())} in {DEFAULT_TFRECORD_LABEL_KEY!r}",
            "store class ids from 0 to the number of classes - 1",
        )
    first = open_image(io.BytesIO(items[0]))
    return TrainingData(source, "tfrecord", items, y, [str(i) for i in range(int(y.max()) + 1)], first.size)


def _decoder(data: TrainingData, spec: PreprocessSpec) -> Callable[[Any], np.ndarray]:
    """Item (path or encoded bytes) → HxWxC uint8 pixels, by edgekit.board.preprocess.pixels."""

    def decode(item: Any) -> np.ndarray:
        where = os.fsdecode(item) if data.kind == "images" else io.BytesIO(item)
        return pixels(open_image(where), spec)

    return decode


def dataset(
    data: TrainingData,
    indices: np.ndarray,
    spec: PreprocessSpec,
    batch: int,
    *,
    shuffle: bool,
    seed: int = 0,
    drop_remainder: bool = False,
) -> Any:
    """The tf.data pipeline: decode in parallel → cache → shuffle → batch → normalize → prefetch."""
    from edgekit.converters.tf_quiet import import_tensorflow

    tf = import_tensorflow()
    autotune = tf.data.AUTOTUNE
    decode = _decoder(data, spec)
    shape = (spec.height, spec.width, spec.num_channels)
    items = [data.items[i] for i in indices]
    if data.kind == "images":  # as bytes: a file name that is not UTF-8 has no tf.string of its str form
        items = [os.fsencode(p) for p in items]
    ds = tf.data.Dataset.from_tensor_slices((tf.constant(items, tf.string), data.labels[indices]))

    def load(item: Any, label: Any) -> tuple[Any, Any]:
        x = tf.numpy_function(decode, [item], tf.uint8, stateful=False)
        return tf.ensure_shape(x, shape), label

    ds = ds.map(load, num_parallel_calls=autotune, deterministic=True).cache()
    if shuffle:
        ds = ds.shuffle(len(items), seed=seed, reshuffle_each_iteration=True)
    mean = tf.constant(spec.mean, tf.float32)
    std = tf.constant(spec.std, tf.float32)
    ds = ds.batch(batch, drop_remainder=drop_remainder)
    ds = ds.map(lambda x, y: ((tf.cast(x, tf.float32) - mean) / std, y), num_parallel_calls=autotune)
    return ds.prefetch(autotune)


def check_arch(arch: str) -> None:
    from edgekit.training.archs import ARCHS

    if arch not in ARCHS and ":" not in arch:
        raise UsageError(f"unknown --arch {arch!r}", f"use one of {', '.join(ARCHS)}, or module.py:function")


def build_model(arch: str, input_shape: tuple[int, int, int], num_classes: int, width: float = 1.0) -> Any:
    """A built-in architecture by name, or ``module.py:fn`` / ``package.module:fn`` (fn(input_shape, num_classes))."""
    from edgekit.training.archs import ARCHS

    if arch in ARCHS:
        kwargs = {"width": width} if arch == "mobilenetv2" else {}
        return ARCHS[arch](input_shape, num_classes, **kwargs)
    check_arch(arch)
    from edgekit.converters.keras_io import call_arch

    return call_arch(arch, (input_shape, num_classes), "input_shape, num_classes")


class _Progress:
    """Training progress: a batch progress bar on a terminal's stderr, one line per epoch, the history.

    ``callback`` feeds it from Keras's ``fit``; the multi-worker loop calls the methods itself.
    """

    def __init__(self, steps: int, epochs: int, show: bool, stream: TextIO | None = None, report: Reporter = SILENT):
        import keras

        self.steps, self.n_epochs, self.show = steps, epochs, show
        self.epochs: list[Epoch] = []
        self.stream = stream or sys.stderr
        self.report = report if show else SILENT
        self.bar: Any = None
        outer = self

        class Callback(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
                outer.epoch_begin(epoch)

            def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
                outer.batch_end()

            def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
                outer.epoch_end(epoch, logs)

        self.callback = Callback()

    def epoch_begin(self, epoch: int) -> None:
        self.start = time.perf_counter()
        self.bar = self.report.progress(self.steps, f"epoch {epoch + 1}/{self.n_epochs}", self.stream)

    def batch_end(self) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def epoch_end(self, epoch: int, logs: Any = None) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        logs = {k: float(v) for k, v in (logs or {}).items() if v is not None}
        row = Epoch(
            epoch + 1,
            logs.get("loss"),
            logs.get("accuracy"),
            logs.get("val_loss"),
            logs.get("val_accuracy"),
            round(time.perf_counter() - self.start, 3),
        )
        self.epochs.append(row)
        if self.show:
            val = f", validation accuracy {row.val_accuracy:.1%}" if row.val_accuracy is not None else ""
            self.stream.write(
                f"epoch {epoch + 1}/{self.n_epochs}: loss {row.loss:.4f}, accuracy "
                f"{row.accuracy:.1%}{val} ({row.seconds:.1f} s)\n"
            )
            self.stream.flush()


def _save_keras(model: Any, output: Path, record: bytes, record_path: Path) -> None:
    """model.save() and the record into a temporary folder beside ``output`` (Keras wants the real suffix),
    then both renamed into place together (:func:`edgekit.fileio.publish`): both or neither, umask modes."""
    from edgekit.fileio import publish

    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{output.name}.", dir=output.parent))
    except OSError as exc:
        raise InputError(
            f"cannot write in output folder {output.parent} ({exc.strerror or exc})", "choose another -o"
        ) from None
    try:
        model.save(tmp / output.name)
        (tmp / record_path.name).write_bytes(record)
        publish([tmp / output.name, tmp / record_path.name], [output, record_path])
    except OSError as exc:
        raise InputError(
            f"cannot write {output} ({exc.strerror or exc})", "free some space or choose another -o"
        ) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class _InputStopped(InputError):
    """Bad data found inside TensorFlow's input threads, which may not let the process end: exit straight away."""

    hard_exit = True


class _OutOfMemory(DeviceError):
    """TensorFlow ran out of memory (exit 9, the machine's limit): its threads may not let the process end either."""

    hard_exit = True


def _fit_across_workers(
    tf: Any,
    strategy: Any,
    model: Any,
    optimizer: Any,
    train_ds: Any,
    val_ds: Any,
    global_batch: int,
    epochs: int,
    progress: _Progress,
) -> None:
    """Synchronous data-parallel training over a TF_CONFIG cluster, in a custom loop.

    Keras 3's ``fit`` does not run under MultiWorkerMirroredStrategy (it fails converting PerReplica
    values: keras-team/keras#20585, tensorflow/tensorflow#72388); TensorFlow's custom-loop recipe does:
    each replica's loss averaged over the global batch (tf.nn.compute_average_loss), gradients
    all-reduced by the optimizer under the strategy, sums reduced across every worker. Each worker
    reads the whole dataset and keeps its share of every batch (AutoShardPolicy.DATA: the image list
    is one source, not files to split).
    """
    import keras

    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    loss_fn = keras.losses.SparseCategoricalCrossentropy(reduction=None)
    sum_op = tf.distribute.ReduceOp.SUM

    def totals(per_replica: tuple) -> list:
        return [strategy.reduce(sum_op, v, axis=None) for v in per_replica]

    @tf.function
    def train_step(batch: Any) -> list:
        def step(x: Any, y: Any) -> tuple:
            with tf.GradientTape() as tape:
                scores = model(x, training=True)
                losses = loss_fn(y, scores)
                loss = tf.nn.compute_average_loss(losses, global_batch_size=global_batch)
            optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
            return _sums(tf, losses, scores, y)

        return totals(strategy.run(step, args=batch))

    @tf.function
    def val_step(batch: Any) -> list:
        def step(x: Any, y: Any) -> tuple:
            scores = model(x, training=False)
            return _sums(tf, loss_fn(y, scores), scores, y)

        return totals(strategy.run(step, args=batch))

    for epoch in range(epochs):
        progress.epoch_begin(epoch)
        loss, accuracy = _run_epoch(strategy, options, train_step, train_ds, progress.batch_end)
        logs = {"loss": loss, "accuracy": accuracy}
        if val_ds is not None:
            logs["val_loss"], logs["val_accuracy"] = _run_epoch(strategy, options, val_step, val_ds)
        progress.epoch_end(epoch, logs)


def _run_epoch(
    strategy: Any, options: Any, step: Any, ds: Any, on_batch: Any = None
) -> tuple[float | None, float | None]:
    """One pass of ``step`` over ``ds`` distributed by ``strategy``: (mean loss, accuracy) over every worker's
    samples, or (None, None) for an empty dataset."""
    loss = correct = count = 0.0
    for batch in strategy.experimental_distribute_dataset(ds.with_options(options)):
        sums = [float(v) for v in step(batch)]
        loss, correct, count = loss + sums[0], correct + sums[1], count + sums[2]
        if on_batch:
            on_batch()
    return (loss / count, correct / count) if count else (None, None)


def _sums(tf: Any, losses: Any, scores: Any, labels: Any) -> tuple:
    """(sum of losses, right answers, samples) of one replica's batch."""
    right = tf.equal(tf.argmax(scores, axis=1, output_type=tf.int64), tf.cast(labels, tf.int64))
    return tf.reduce_sum(losses), tf.reduce_sum(tf.cast(right, tf.float32)), tf.cast(tf.size(labels), tf.float32)


@dataclass
class _TrainPlan:
    """What the stages of :func:`train` hand on: the outputs, the data and its split, the preprocessing."""

    output: Path
    record_path: Path
    data: TrainingData
    spec: PreprocessSpec
    size_from: str  # where the input size came from, for the errors that name it
    train_idx: np.ndarray
    val_idx: np.ndarray


@dataclass
class _Distributed:
    """The strategy chosen, the global batch, and the tf.data pipelines batched for it."""

    choice: Any  # strategy.StrategyChoice
    global_batch: int
    advice: list[str]
    train_ds: Any
    val_ds: Any
    steps: int

    @property
    def on_tpu(self) -> bool:  # TPUs need static shapes: every batch full
        return self.choice.kind == "tpu"


def train(opts: TrainOptions) -> TrainResult:
    """Train, save ``opts.output`` and its record; return the summary ``edgekit train --json`` prints.

    The stages, in order: the outputs checked (:func:`_check_outputs`), the data read and split
    (:func:`_plan_data`), the strategy and the input pipelines (:func:`_distribute`), the model built
    and compiled in the strategy (:func:`_build_model`), the fit (:func:`_fit`), the model and its record
    written (:func:`_write`) and the result (:func:`_result`).
    """
    from edgekit.converters.tf_quiet import import_tensorflow

    output, record_path = _check_outputs(opts)
    plan = _plan_data(opts, output, record_path)
    tf = import_tensorflow()
    import keras  # noqa: F401  (loaded before the strategy is resolved, as it always was)

    dist = _distribute(opts, plan)
    model, optimizer = _build_model(tf, opts, plan, dist)
    progress, seconds = _fit(tf, opts, plan, dist, model, optimizer)
    written = _write(tf, opts, plan, dist, model)
    return _result(opts, plan, dist, progress, seconds, written)


def _check_outputs(opts: TrainOptions) -> tuple[Path, Path]:
    """(the model's path, its record's): refused now, before any work, when they cannot be written; the options
    and a bad TF_CONFIG too."""
    from edgekit.fileio import refuse_folders, require_output_folder
    from edgekit.training import strategy as strategy_mod

    output = Path(opts.output)
    if output.suffix not in (".keras", ".h5"):
        raise UsageError(f"-o {output}: the model is saved as .keras (or .h5)", "name the output model.keras")
    if output.is_dir():
        raise UsageError(f"-o {output} is a folder", "name the output file, e.g. model.keras")
    cluster, _ = strategy_mod.multi_worker_cluster(os.environ)  # a bad TF_CONFIG fails now, before any work
    record_path = sidecar_path(output)
    if cluster is None or cluster.is_chief:  # the other workers of a cluster write nothing, not even a folder
        require_output_folder(output, opts.report if opts.show_progress else None)
        refuse_folders([output, record_path])  # now, not after the training: the two are published together
    if opts.epochs < 1 or opts.batch_size < 1 or not 0.0 <= opts.validation_split < 1.0:
        raise UsageError(
            "--epochs and --batch-size must be positive, --validation-split in [0, 1)",
            "e.g. --epochs 10 --batch-size 32 --validation-split 0.2",
        )
    check_arch(opts.arch)
    return output, record_path


def _plan_data(opts: TrainOptions, output: Path, record_path: Path) -> _TrainPlan:
    """DATA read, its input size and preprocessing decided, split into training and validation examples."""
    data = read_data(opts.data, opts.tfrecord_key)
    if data.empty_classes:  # Keras's folder reader keeps them as classes never seen; edgekit leaves them out: said
        opts.report.warn(
            f"DATA {opts.data}: {len(data.empty_classes)} class folder(s) hold no images and are left "
            f"out ({', '.join(data.empty_classes[:5])}{', ...' if len(data.empty_classes) > 5 else ''}): "
            f"the model learns {len(data.class_names)} classes"
        )
    width, height = opts.input_size or data.first_size
    size_from = "--input-size" if opts.input_size else f"the first image's size (DATA {opts.data}, no --input-size)"
    if max(width, height) > MAX_INPUT_SIDE:
        raise UsageError(
            f"{size_from} {width}x{height} is larger than {MAX_INPUT_SIDE} pixels on a side: no Edge "
            "TPU classifier takes such images",
            "train at the size the model will classify, e.g. --input-size 224x224; images are resized to it",
        )
    spec = PreprocessSpec.with_scaling(width, height, opts.scaling, channels=opts.channels)
    train_idx, val_idx = data.split(opts.validation_split, opts.seed)
    if len(train_idx) == 0:
        raise InputError(
            f"DATA {opts.data}: no training examples left after the validation split",
            "add images, or lower --validation-split",
        )
    if opts.batch_size > len(train_idx):  # said before TensorFlow starts; the global batch is checked later
        raise UsageError(
            f"--batch-size {opts.batch_size} is larger than the {len(train_idx)} training examples",
            "lower --batch-size",
        )
    return _TrainPlan(output, record_path, data, spec, size_from, train_idx, val_idx)


def _distribute(opts: TrainOptions, plan: _TrainPlan) -> _Distributed:
    """The strategy for this machine (said as a note, its advice as warnings) and the pipelines in its batches."""
    from edgekit.training import strategy as strategy_mod

    choice = strategy_mod.resolve(worker_timeout=opts.worker_timeout)
    global_batch, advice = strategy_mod.global_batch(opts.batch_size, choice)
    if opts.show_progress:
        opts.report.note(
            f"strategy: {choice.kind} ({choice.reason}), {choice.replicas} replica(s), global batch {global_batch}"
        )
    for a in advice:
        opts.report.warn(a)
    on_tpu = choice.kind == "tpu"
    n_train = len(plan.train_idx)
    train_ds = dataset(
        plan.data, plan.train_idx, plan.spec, global_batch, shuffle=True, seed=opts.seed, drop_remainder=on_tpu
    )
    val_ds = dataset(plan.data, plan.val_idx, plan.spec, global_batch, shuffle=False) if len(plan.val_idx) else None
    steps = n_train // global_batch if on_tpu else -(-n_train // global_batch)
    if global_batch > n_train:
        raise UsageError(
            f"the global batch {global_batch} is larger than the {n_train} training examples", "lower --batch-size"
        )
    return _Distributed(choice, global_batch, advice, train_ds, val_ds, steps)


def _build_model(tf: Any, opts: TrainOptions, plan: _TrainPlan, dist: _Distributed) -> tuple[Any, Any]:
    """(model, optimizer): the architecture built and compiled inside the strategy's scope, seeded."""
    import keras

    spec = plan.spec
    width, height = spec.width, spec.height
    keras.utils.set_random_seed(opts.seed)
    with dist.choice.strategy.scope():
        try:
            model = build_model(opts.arch, (height, width, spec.num_channels), len(plan.data.class_names), opts.width)
        except ValueError as exc:  # a built-in architecture's layers cannot shrink the image that far
            if ":" in opts.arch:
                raise
            layer = re.search(r"calling (\w+)\.call", str(exc))
            raise UsageError(
                f"{plan.size_from} {width}x{height} is too small for --arch {opts.arch}"
                + (
                    f": its {layer.group(1)} layer has too little of the image left"
                    if layer
                    else f" ({first_line(exc, 160)})"
                ),
                "train at a larger size, e.g. --input-size 32x32 or more; images are resized to it",
            ) from None
        except (tf.errors.ResourceExhaustedError, MemoryError):
            raise _OutOfMemory(
                f"out of memory building --arch {opts.arch} for {width}x{height} images",
                "lower --input-size (or --width)",
            ) from None
        optimizer = keras.optimizers.Adam(opts.learning_rate)
        model.compile(
            optimizer=optimizer,
            loss="sparse_categorical_crossentropy",
            metrics=["accuracy"],
            steps_per_execution=TPU_STEPS_PER_EXECUTION if dist.on_tpu else 1,
        )
    return model, optimizer


def _fit(
    tf: Any, opts: TrainOptions, plan: _TrainPlan, dist: _Distributed, model: Any, optimizer: Any
) -> tuple[_Progress, float]:
    """(the progress with each epoch's numbers, seconds): Keras's ``fit``, or the custom loop across workers;
    TensorFlow's failures turned into edgekit's errors."""
    from edgekit.converters.tf_quiet import silenced
    from edgekit.training import strategy as strategy_mod

    choice = dist.choice
    start = time.perf_counter()
    try:
        with silenced() as (stderr, _log):  # TensorFlow's noise hidden; the epoch lines reach the real stderr
            progress = _Progress(dist.steps, opts.epochs, opts.show_progress, stderr, opts.report)
            if choice.kind == "multi_worker":
                _fit_across_workers(
                    tf,
                    choice.strategy,
                    model,
                    optimizer,
                    dist.train_ds,
                    dist.val_ds,
                    dist.global_batch,
                    opts.epochs,
                    progress,
                )
            else:
                model.fit(
                    dist.train_ds,
                    validation_data=dist.val_ds,
                    epochs=opts.epochs,
                    verbose=0,
                    callbacks=[progress.callback],
                )
    except tf.errors.ResourceExhaustedError:
        raise _OutOfMemory(
            f"out of memory training --arch {opts.arch} on {plan.spec.width}x{plan.spec.height} "
            f"images in global batches of {dist.global_batch}",
            "lower --batch-size or --input-size",
        ) from None
    except tf.errors.OpError as exc:  # an image that does not decode surfaces here, from inside tf.numpy_function
        text = str(exc)
        if choice.kind == "multi_worker" and isinstance(
            exc, (tf.errors.DeadlineExceededError, tf.errors.UnavailableError, tf.errors.CancelledError)
        ):
            raise strategy_mod.WorkersUnreachable(
                f"a worker of the TF_CONFIG cluster stopped answering during training ({first_line(exc, 200)})",
                "start every worker again with the same TF_CONFIG; --worker-timeout S waits longer",
            ) from None
        line = next((ln for ln in text.splitlines() if "InputError" in ln), first_line(exc))
        raise _InputStopped(
            f"training failed on DATA {opts.data}: {line.split('InputError:')[-1].strip()}",
            "remove or fix the file, then train again",
        ) from None
    return progress, time.perf_counter() - start


def _write(tf: Any, opts: TrainOptions, plan: _TrainPlan, dist: _Distributed, model: Any) -> bool:
    """The model and its record (preprocessing, labels, the calibration data, how it was trained) written
    together, by the chief only (another worker of a cluster says so); whether this run wrote them."""
    try:
        calib = os.path.relpath(Path(opts.data).resolve(), plan.output.resolve().parent)
    except ValueError:  # another drive on Windows
        calib = str(Path(opts.data).resolve())
    choice = dist.choice
    training = {
        "arch": opts.arch,
        "width": opts.width if opts.arch == "mobilenetv2" else None,
        "epochs": opts.epochs,
        "batch_per_replica": opts.batch_size,
        "global_batch": dist.global_batch,
        "strategy": choice.summary().to_dict(),
        "tensorflow": tf.__version__,
    }
    record = ModelRecord(
        plan.spec,
        plan.data.class_names,
        {"created_by": CREATED_BY, "edgekit": __version__, "calibration": {"source": calib}, "training": training},
    )
    if choice.writes_outputs:
        _save_keras(model, plan.output, record.to_json().encode(), plan.record_path)
        return True
    if opts.show_progress:
        opts.report.note(
            f"{choice.cluster.task_type} {choice.cluster.task_index} of the cluster: trained its share; "
            "the chief writes the model and its record"
        )
    return False


def _result(
    opts: TrainOptions, plan: _TrainPlan, dist: _Distributed, progress: _Progress, seconds: float, written: bool
) -> TrainResult:
    """What ``edgekit train --json`` prints."""
    data, spec = plan.data, plan.spec
    last = progress.epochs[-1] if progress.epochs else None
    return TrainResult(
        output=str(plan.output) if written else None,
        record=str(plan.record_path) if written else None,
        arch=opts.arch,
        labels=tuple(data.class_names),
        data=TrainData(opts.data, data.kind, len(data.class_names), int(len(plan.train_idx)), int(len(plan.val_idx))),
        preprocess=TrainPreprocess(**asdict(spec), description=spec.describe()),
        strategy=dist.choice.summary(),
        batch_per_replica=opts.batch_size,
        global_batch=dist.global_batch,
        steps_per_execution=TPU_STEPS_PER_EXECUTION if dist.on_tpu else 1,
        advice=tuple(dist.advice),
        epochs=tuple(progress.epochs),
        validation_accuracy=last.val_accuracy if last is not None else None,
        seconds=round(seconds, 3),
    )
