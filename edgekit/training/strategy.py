"""Which tf.distribute strategy trains the model, and why: a TPU, several workers, several GPUs, or one device.

Order, first that applies wins (each one that does not apply says why in ``StrategyChoice.tried``):

1. a TPU, when ``COLAB_TPU_ADDR`` (Colab: ``grpc://<addr>``) or ``TPU_NAME`` (Cloud TPU; ``local`` on
   a TPU VM) is set: ``TPUClusterResolver`` → connect → ``initialize_tpu_system`` → ``TPUStrategy``
   (the sequence of TensorFlow's TPU guide, https://www.tensorflow.org/guide/tpu);
2. several workers, when ``TF_CONFIG`` names a cluster: ``MultiWorkerMirroredStrategy``
   (https://www.tensorflow.org/tutorials/distribute/multi_worker_with_keras);
3. several GPUs (or several logical CPU devices, what the tests use): ``MirroredStrategy``;
4. else TensorFlow's default strategy (one device).

Without those variables no TPU is looked for: an unset ``TPUClusterResolver()`` asks the GCE metadata
server over the network, which must not happen on a laptop.

A TPU address that does not answer must not take the run down or hang it.
``experimental_connect_to_cluster`` repoints TensorFlow's eager context at the TPU before anything
has talked to it; when nothing listens there, TensorFlow retries without a time limit, and when
something else answers (a proxy, another server), every later call, even listing the local devices,
fails. So each address is first probed over TCP with a short timeout, and after any failure past
the connect the eager context is put back to a local one before the next strategy is tried.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from edgekit.errors import DeviceError, first_line

TPU_BATCH_PER_CORE = 128  # "a batch size of 128 per TPU core" (TensorFlow's TPU guide, performance section)
TPU_PROBE_SECONDS = 5.0   # a TPU worker answers a TCP connect in milliseconds; an address that does not is no TPU


@dataclass
class StrategyChoice:
    kind: str                       # tpu | multi_worker | mirrored | default
    reason: str                     # why this one
    replicas: int
    strategy: Any = None
    tried: list[str] = field(default_factory=list)  # why the ones before it did not apply

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "reason": self.reason, "replicas": self.replicas, "tried": self.tried}


def tpu_address(env: Mapping[str, str]) -> tuple[str | None, str]:
    """(the ``tpu`` argument for TPUClusterResolver or None, which variable gave it / why there is none)."""
    if env.get("COLAB_TPU_ADDR"):
        return "grpc://" + env["COLAB_TPU_ADDR"], "COLAB_TPU_ADDR"
    if env.get("TPU_NAME"):
        return env["TPU_NAME"], "TPU_NAME"
    return None, "no TPU: neither COLAB_TPU_ADDR nor TPU_NAME is set"


def multi_worker_cluster(env: Mapping[str, str]) -> tuple[int, str]:
    """(workers named by ``TF_CONFIG``, why): 0 when it is unset or names no cluster."""
    raw = env.get("TF_CONFIG")
    if not raw:
        return 0, "no multi-worker cluster: TF_CONFIG is not set"
    try:
        cluster = json.loads(raw).get("cluster") or {}
        workers = len(cluster.get("worker", [])) + len(cluster.get("chief", []))
    except (ValueError, AttributeError, TypeError):
        return 0, "no multi-worker cluster: TF_CONFIG is not JSON with a 'cluster'"
    if workers < 1:
        return 0, "no multi-worker cluster: TF_CONFIG names no worker"
    return workers, f"TF_CONFIG names {workers} worker(s)"


def split_host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of ``grpc://host:port``, ``host:port`` or ``[v6]:port``; None when it names no port."""
    address = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None
    return host.strip("[]"), int(port)


def probe_address(address: str, timeout: float = TPU_PROBE_SECONDS) -> str | None:
    """Why nothing answers a TCP connect at ``address`` within ``timeout`` seconds; None when something does.

    Checked before TensorFlow is pointed there: TensorFlow itself retries an address where nothing
    listens without a time limit.
    """
    where = split_host_port(address)
    if where is None:
        return None  # not host:port (a TPU name): the resolver and TensorFlow judge it
    try:
        with socket.create_connection(where, timeout=timeout):
            return None
    except TimeoutError:
        return f"nothing answers at {address} within {timeout:g} s"
    except OSError as exc:
        return f"nothing answers at {address} ({exc.strerror or first_line(exc)})"


def _tpu_worker_addresses(resolver: Any) -> list[str]:
    """The addresses TensorFlow will connect to for this resolver (none for a local TPU)."""
    if resolver.master() in ("", "local"):
        return []
    spec = resolver.cluster_spec()
    return [addr for job in spec.jobs for addr in spec.job_tasks(job)]


def _reset_eager_context() -> None:
    """Point TensorFlow's eager context back at this machine after a failed or partial TPU connect.

    TensorFlow has no public call that undoes ``experimental_connect_to_cluster``; a fresh global
    context (what TensorFlow's own tests use, ``context._reset_context``) drops the server
    definition, the coordination service and the TPU device scope the connect entered.
    """
    from tensorflow.python.eager import context

    context._reset_context()


def _try_tpu(tf: Any, tpu: str) -> Any:
    """TPUStrategy on the TPU at ``tpu``, or an exception saying why not (TensorFlow left local)."""
    from tensorflow.python.eager import context

    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
    for address in _tpu_worker_addresses(resolver):
        why_not = probe_address(address)
        if why_not:
            raise ConnectionError(why_not)
    try:
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    except BaseException:
        if context.get_server_def() is not None:  # repointed at the TPU: undo it for the next strategies
            _reset_eager_context()
        raise


def resolve(env: Mapping[str, str] | None = None) -> StrategyChoice:
    """Create the strategy that fits this machine (see the module docstring); TensorFlow is imported here."""
    from edgekit.converters.tf_quiet import import_tensorflow

    tf = import_tensorflow()
    env = os.environ if env is None else env
    tried: list[str] = []

    tpu, why = tpu_address(env)
    tpu_failed = ""
    if tpu is None:
        tried.append(why)
    else:
        try:
            strategy = _try_tpu(tf, tpu)
            return StrategyChoice("tpu", f"TPU {tpu} (from {why})", strategy.num_replicas_in_sync, strategy, tried)
        except Exception as exc:  # no TPU answers there: say why and go on
            tpu_failed = f"no TPU at {tpu} (from {why}): {first_line(exc, 200)}"
            tried.append(tpu_failed)

    try:
        workers, why = multi_worker_cluster(env)
        if workers:
            strategy = tf.distribute.MultiWorkerMirroredStrategy()
            return StrategyChoice("multi_worker", why, strategy.num_replicas_in_sync, strategy, tried)
        tried.append(why)

        gpus = tf.config.list_logical_devices("GPU")
        devices = [d.name for d in gpus] or [d.name for d in tf.config.list_logical_devices("CPU")]
    except Exception as exc:
        if not tpu_failed:
            raise
        # The TPU attempt left TensorFlow unusable even after the reset: say so in one line.
        raise DeviceError(f"TensorFlow cannot use this machine's devices after the failed TPU connect "
                          f"({tpu_failed}): {first_line(exc, 200)}",
                          "unset COLAB_TPU_ADDR and TPU_NAME to train here, or point them at a reachable TPU") from None
    if len(devices) > 1:
        kind = "GPUs" if gpus else "logical CPU devices"
        strategy = tf.distribute.MirroredStrategy(devices)
        return StrategyChoice("mirrored", f"{len(devices)} {kind}", strategy.num_replicas_in_sync, strategy, tried)
    tried.append(f"one device only ({devices[0] if devices else 'CPU'})")
    strategy = tf.distribute.get_strategy()
    return StrategyChoice("default", "one device", strategy.num_replicas_in_sync, strategy, tried)


def global_batch(per_replica: int, choice: StrategyChoice) -> tuple[int, list[str]]:
    """(per-replica batch × replicas, advice): on a TPU, 128 per core is the guide's size, 8 the least."""
    advice = []
    if choice.kind == "tpu":
        if per_replica % 8:
            advice.append(f"a batch of {per_replica} per TPU core is not a multiple of 8: the TPU pads it "
                          f"and wastes work; use a multiple of 8")
        elif per_replica % TPU_BATCH_PER_CORE:
            advice.append(f"TPUs run best with {TPU_BATCH_PER_CORE} (or a multiple) per core: "
                          f"--batch-size {TPU_BATCH_PER_CORE} gives a global batch of "
                          f"{TPU_BATCH_PER_CORE * choice.replicas}")
    return per_replica * choice.replicas, advice
