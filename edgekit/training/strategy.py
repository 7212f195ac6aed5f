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

from edgekit.errors import DeviceError, UsageError, first_line
from edgekit.results.train import TrainStrategy

TPU_BATCH_PER_CORE = 128  # "a batch size of 128 per TPU core" (TensorFlow's TPU guide, performance section)
TPU_PROBE_SECONDS = 5.0  # a TPU worker answers a TCP connect in milliseconds; an address that does not is no TPU


@dataclass
class StrategyChoice:
    kind: str  # tpu | multi_worker | mirrored | default
    reason: str  # why this one
    replicas: int
    strategy: Any = None
    tried: list[str] = field(default_factory=list)  # why the ones before it did not apply
    cluster: Cluster | None = None  # multi_worker: the TF_CONFIG cluster and this task

    @property
    def writes_outputs(self) -> bool:
        """Only the chief of a multi-worker cluster writes the model; every other run writes its own."""
        return self.cluster is None or self.cluster.is_chief

    def summary(self) -> TrainStrategy:
        """What ``edgekit train --json`` (and the model's record) says of the choice."""
        return TrainStrategy(self.kind, self.reason, self.replicas, tuple(self.tried), self.writes_outputs)


def tpu_address(env: Mapping[str, str]) -> tuple[str | None, str]:
    """(the ``tpu`` argument for TPUClusterResolver or None, which variable gave it / why there is none)."""
    if env.get("COLAB_TPU_ADDR"):
        return "grpc://" + env["COLAB_TPU_ADDR"], "COLAB_TPU_ADDR"
    if env.get("TPU_NAME"):
        return env["TPU_NAME"], "TPU_NAME"
    return None, "no TPU: neither COLAB_TPU_ADDR nor TPU_NAME is set"


@dataclass
class Cluster:
    """What ``TF_CONFIG`` says: every task's address by type, and which task this process is."""

    tasks: dict[str, list[str]]
    task_type: str
    task_index: int

    @property
    def workers(self) -> int:
        return len(self.tasks.get("worker", [])) + len(self.tasks.get("chief", []))

    @property
    def is_chief(self) -> bool:
        """The task that writes the model: the ``chief``, else worker 0 (TensorFlow's convention)."""
        return self.task_type == "chief" or (
            "chief" not in self.tasks and self.task_type == "worker" and self.task_index == 0
        )

    @property
    def me(self) -> str:
        return self.tasks[self.task_type][self.task_index]

    def others(self) -> list[str]:
        return [a for kind in ("chief", "worker") for a in self.tasks.get(kind, []) if a != self.me]


def _bad_tf_config(why: str) -> UsageError:
    return UsageError(
        f"TF_CONFIG {why}",
        'set it like {"cluster": {"worker": ["host1:port", "host2:port"]}, "task": {"type": "worker", '
        '"index": 0}}, the same cluster on every worker and each its own index; or unset it',
    )


def parse_tf_config(raw: str) -> Cluster:
    """``TF_CONFIG`` read strictly: a cluster of ``host:port`` addresses and this task, its index in range."""
    try:
        doc = json.loads(raw)
    except RecursionError:
        raise _bad_tf_config("is nested too deeply to be read") from None
    except ValueError as exc:
        raise _bad_tf_config(f"is not JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("cluster"), dict):
        raise _bad_tf_config("has no 'cluster' object")
    tasks = doc["cluster"]
    for kind, addresses in tasks.items():
        if not isinstance(addresses, list) or not all(
            isinstance(a, str) and split_host_port(a, any_port=True) for a in addresses
        ):
            raise _bad_tf_config(f"cluster {kind!r} is not a list of host:port addresses")
        for a in addresses:
            if split_host_port(a) is None:
                raise _bad_tf_config(f"cluster {kind!r} address {a!r} has no port in 1..65535")
    if not tasks.get("worker") and not tasks.get("chief"):
        raise _bad_tf_config("names no worker or chief")
    task = doc.get("task")
    if not isinstance(task, dict) or task.get("type") not in tasks:
        raise _bad_tf_config(f"task {task!r} has no type among the cluster's ({', '.join(tasks)})")
    index = task.get("index", 0)
    size = len(tasks[task["type"]])
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < size:
        raise _bad_tf_config(
            f"task index {index!r} is out of range: the cluster has {size} {task['type']}(s), indexes 0 to {size - 1}"
        )
    return Cluster(tasks, task["type"], index)


def multi_worker_cluster(env: Mapping[str, str]) -> tuple[Cluster | None, str]:
    """(the cluster ``TF_CONFIG`` names, why); None when it is unset. A malformed TF_CONFIG is a UsageError."""
    raw = env.get("TF_CONFIG")
    if not raw or not raw.strip():
        return None, "no multi-worker cluster: TF_CONFIG is not set"
    cluster = parse_tf_config(raw)
    role = "the chief" if cluster.is_chief else f"{cluster.task_type} {cluster.task_index}"
    return cluster, f"TF_CONFIG names {cluster.workers} worker(s); this is {role} ({cluster.me})"


class WorkersUnreachable(DeviceError):
    """The cluster did not come together in time, or a worker was lost. TensorFlow's own threads may still wait
    on it, so the process exits straight after the error line (``hard_exit``) rather than hang in its shutdown."""

    hard_exit = True


def split_host_port(address: str, any_port: bool = False) -> tuple[str, int] | None:
    """(host, port) of ``grpc://host:port``, ``host:port`` or ``[v6]:port``; None when it names no port (no port in
    1..65535 unless ``any_port``: a socket cannot bind or reach 99999)."""
    address = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = address.rpartition(":")
    if not sep or not port.isascii() or not port.isdigit() or not host:
        return None
    if not any_port and not 0 < int(port) <= 65535:
        return None
    return host.strip("[]"), int(port)


def probe_address(address: str, timeout: float = TPU_PROBE_SECONDS) -> str | None:
    """Why nothing answers a TCP connect at ``address`` within ``timeout`` seconds; None when something does.

    Checked before TensorFlow is pointed there: TensorFlow itself retries an address where nothing
    listens without a time limit.
    """
    where = split_host_port(address, any_port=True)
    if where is None:
        return None  # not host:port (a TPU name): the resolver and TensorFlow judge it
    if not 0 < where[1] <= 65535:
        return f"{address} names port {where[1]}, outside 1..65535"
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


RENDEZVOUS_GRACE = 3.0  # seconds a worker keeps answering after it saw every other one, for the slower ones
#: What a task's rendezvous listener says to each knock: a port that says something else is no edgekit worker.
RENDEZVOUS_GREETING = b"edgekit-rendezvous 1\n"
#: An HTTP/2 client preface and an empty SETTINGS frame: a gRPC server (TensorFlow's, a faster worker already past
#: the rendezvous) answers with its own SETTINGS frame (it sends one unasked, too).
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def _is_http2_settings(data: bytes) -> bool:
    """A frame header of type SETTINGS (4) on stream 0: what every HTTP/2 (gRPC) server sends first."""
    return len(data) >= 9 and data[3] == 0x04 and data[5:9] == b"\x00\x00\x00\x00"


def knock(address: str, timeout: float) -> tuple[bool, str | None]:
    """Knock at another task of the cluster: (something answered, why it is not a worker; None when it is one).

    A worker answers either as an edgekit rendezvous listener (its greeting) or as TensorFlow's gRPC server
    (an HTTP/2 SETTINGS frame). Anything else on the port (an SSH or web server, a listener that says nothing)
    would make TensorFlow wait for it for ever, so it is named instead.
    """
    where = split_host_port(address)
    if where is None:
        return False, f"{address} is not host:port with a port in 1..65535"
    try:
        with socket.create_connection(where, timeout=timeout) as conn:
            conn.settimeout(min(timeout, 2.0))
            data = b""
            try:
                data = conn.recv(64)
            except TimeoutError:
                pass
            if not data:  # a server that waits for its client to speak first
                try:
                    conn.sendall(_HTTP2_PREFACE)
                    data = conn.recv(64)
                except TimeoutError:
                    pass
    except TimeoutError:  # nothing there (yet): the caller keeps knocking
        return False, f"nothing answers at {address} within {timeout:g} s"
    except OSError as exc:
        return False, f"nothing answers at {address} ({exc.strerror or first_line(exc)})"
    if (data and RENDEZVOUS_GREETING.startswith(data)) or _is_http2_settings(data):
        return True, None
    if not data:  # maybe a worker too busy to answer in time: knocked at again until the deadline
        return False, f"{address} takes connections but says nothing a worker says"
    return True, f"{address} answers but is not a TensorFlow worker (it said {data[:40]!r})"


def rendezvous(cluster: Cluster, timeout: float, grace: float = RENDEZVOUS_GRACE) -> None:
    """Wait until every other task of the cluster answers on its port, at most ``timeout`` seconds.

    TensorFlow's MultiWorkerMirroredStrategy waits for the whole cluster without a time limit, in C++
    that holds the interpreter (no thread, timer or signal handler of ours runs meanwhile), so a worker
    that never starts would hang every other one for good. So first each task answers TCP on its own
    port (a plain listener that greets each knock, closed before TensorFlow binds the port) and knocks on
    the others' until all have answered; a knock answered by TensorFlow's gRPC server (a faster worker
    already past this point) counts too (:func:`knock`). WorkersUnreachable names the silent ones, or at
    once a port where something else answers (TensorFlow would wait for it for ever).
    """
    import time

    listener = _listen(cluster)
    stop, thread = _greet_knocks(listener)
    try:
        _await_others(cluster, timeout)
        time.sleep(grace)  # the others may still be knocking on this port
    finally:
        stop.set()
        thread.join()
        listener.close()


def _listen(cluster: Cluster) -> socket.socket:
    """A listening socket on this task's own port (from TF_CONFIG); DeviceError when the port cannot be had."""
    host, port = split_host_port(cluster.me) or ("", 0)
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(("::" if ":" in host else "", port))
    except OSError as exc:
        listener.close()
        raise DeviceError(
            f"this task's address {cluster.me} (from TF_CONFIG) cannot be used here: {exc.strerror or exc}",
            "give each worker a free port of its own machine in TF_CONFIG",
        ) from exc
    listener.listen(16)
    listener.settimeout(0.2)
    return listener


def _greet_knocks(listener: socket.socket) -> tuple[Any, Any]:
    """(stop event, thread): a daemon thread greeting every knock on ``listener`` until the event is set."""
    import threading

    stop = threading.Event()

    def answer() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            try:
                conn.settimeout(1.0)
                conn.sendall(RENDEZVOUS_GREETING)
            except OSError:
                pass
            finally:
                conn.close()

    thread = threading.Thread(target=answer, name="edgekit-rendezvous", daemon=True)
    thread.start()
    return stop, thread


def _await_others(cluster: Cluster, timeout: float) -> None:
    """Knock on every other task until each has answered as a worker; WorkersUnreachable at the deadline, or at
    once when something that is no worker holds one of their ports."""
    import time

    waiting = list(cluster.others())
    whys: dict[str, str | None] = {}
    deadline = time.monotonic() + timeout
    while waiting and time.monotonic() < deadline:
        still = []
        for a in waiting:
            answered, why = knock(a, min(1.0, max(0.05, deadline - time.monotonic())))
            whys[a] = why
            if answered and why:  # no worker will ever answer on a port something else holds
                raise WorkersUnreachable(
                    f"the multi-worker cluster cannot come together: {why}",
                    "check TF_CONFIG's addresses: each must be a port `edgekit train` (with the same TF_CONFIG) "
                    "listens on, not another service's",
                )
            if why:
                still.append(a)
        waiting = still
        if waiting:
            time.sleep(0.2)
    if waiting:
        raise WorkersUnreachable(
            f"the multi-worker cluster did not come together within {timeout:g} s: {cluster.me} heard nothing "
            f"from {', '.join(waiting)}"
            + "".join(f" ({whys[a]})" for a in waiting[:1] if whys.get(a) and "says nothing" in (whys[a] or "")),
            "start `edgekit train` with the same TF_CONFIG (and its own task index) on every worker, check the "
            "addresses and that their ports are open, or wait longer with --worker-timeout S",
        )


def _multi_worker_strategy(tf: Any, cluster: Cluster, timeout: float) -> Any:
    """MultiWorkerMirroredStrategy once every worker answers (:func:`rendezvous`); its collectives get the
    same time limit (CommunicationOptions), so a worker lost during training ends the run too."""
    rendezvous(cluster, timeout)
    options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=timeout)
    try:
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    except Exception as exc:
        raise DeviceError(
            f"TensorFlow could not set up the multi-worker cluster: {first_line(exc, 300)}",
            "check TF_CONFIG's addresses: this task's own port must be free on this machine",
        ) from None


WORKER_TIMEOUT = 120.0  # seconds the workers of a TF_CONFIG cluster get to join, and each collective to finish


def resolve(env: Mapping[str, str] | None = None, worker_timeout: float = WORKER_TIMEOUT) -> StrategyChoice:
    """Create the strategy that fits this machine (see the module docstring); TensorFlow is imported here."""
    from edgekit.converters.tf_quiet import import_tensorflow

    env = os.environ if env is None else env
    cluster, cluster_why = multi_worker_cluster(env)  # a malformed TF_CONFIG fails before TensorFlow loads
    tf = import_tensorflow()
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
        if cluster is not None:
            strategy = _multi_worker_strategy(tf, cluster, worker_timeout)
            return StrategyChoice("multi_worker", cluster_why, strategy.num_replicas_in_sync, strategy, tried, cluster)
        tried.append(cluster_why)

        gpus = tf.config.list_logical_devices("GPU")
        devices = [d.name for d in gpus] or [d.name for d in tf.config.list_logical_devices("CPU")]
    except DeviceError:
        raise
    except Exception as exc:
        if not tpu_failed:
            raise
        # The TPU attempt left TensorFlow unusable even after the reset: say so in one line.
        raise DeviceError(
            f"TensorFlow cannot use this machine's devices after the failed TPU connect "
            f"({tpu_failed}): {first_line(exc, 200)}",
            "unset COLAB_TPU_ADDR and TPU_NAME to train here, or point them at a reachable TPU",
        ) from None
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
            advice.append(
                f"a batch of {per_replica} per TPU core is not a multiple of 8: the TPU pads it "
                f"and wastes work; use a multiple of 8"
            )
        elif per_replica % TPU_BATCH_PER_CORE:
            advice.append(
                f"TPUs run best with {TPU_BATCH_PER_CORE} (or a multiple) per core: "
                f"--batch-size {TPU_BATCH_PER_CORE} gives a global batch of "
                f"{TPU_BATCH_PER_CORE * choice.replicas}"
            )
    return per_replica * choice.replicas, advice
