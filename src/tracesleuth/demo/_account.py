"""What a demo process reports of its telemetry: how many spans and log records it recorded, and
what became of them on their way to the collector (:class:`SignalAccount`), one
:class:`ProcessAccount` per process, written as it stops and read by the run.

The counting itself happens in the process (:mod:`._telemetry`); this module is the report's
format, shared by the processes and the run, without the OpenTelemetry SDK.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["NO_TELEMETRY", "ProcessAccount", "SignalAccount"]


@dataclass(frozen=True)
class SignalAccount:
    """What became of the spans (or the log records) one process recorded.

    ``recorded = exported + export_failed + dropped``: every item is in exactly one of the three.

    Attributes
    ----------
    recorded : int
        Spans ended, or log records emitted: handed to the SDK's pipeline (counted beside the
        batch processor, :class:`~._telemetry.CountingSpanProcessor`).
    exported : int
        In a batch the collector accepted (HTTP 200).
    export_failed : int
        In a batch the collector refused, or never received (after the exporter's retries).

    Examples
    --------
    >>> a = SignalAccount(recorded=100, exported=90, export_failed=4)
    >>> a.dropped, a.lost
    (6, 10)
    >>> a.describe("spans")
    'spans: 100 recorded, 90 exported, 4 export failed, 6 dropped before export'
    """

    recorded: int
    exported: int
    export_failed: int

    @property
    def dropped(self) -> int:
        """Recorded, neither exported nor failed: dropped by the batch processor before export (its
        queue full, the record ended after its shutdown, or still queued when a shutdown timed out)."""
        return self.recorded - self.exported - self.export_failed

    @property
    def lost(self) -> int:
        """Recorded and never accepted by the collector: ``dropped + export_failed``."""
        return self.recorded - self.exported

    def __add__(self, other: "SignalAccount") -> "SignalAccount":
        return SignalAccount(self.recorded + other.recorded, self.exported + other.exported,
                             self.export_failed + other.export_failed)

    def describe(self, noun: str) -> str:
        """One line, ``noun`` naming the items (``"spans"``, ``"log records"``)."""
        return (f"{noun}: {self.recorded:,} recorded, {self.exported:,} exported, {self.export_failed:,} export "
                f"failed, {self.dropped:,} dropped before export")

    def to_dict(self) -> dict:
        """``recorded``, ``exported``, ``export_failed`` and ``dropped``."""
        return {"recorded": self.recorded, "exported": self.exported, "export_failed": self.export_failed,
                "dropped": self.dropped}


#: A signal no process recorded anything of.
NO_TELEMETRY = SignalAccount(0, 0, 0)


@dataclass(frozen=True)
class ProcessAccount:
    """What one demo process recorded of its spans and log records, and what became of them.

    Each service instance and each load generator writes its own as it stops, once its telemetry
    is shut down (:meth:`write`, into :attr:`._protocol.DemoConfig.telemetry_dir`); the run reads them all
    (:meth:`read_all`) into its health (:class:`~._health.RunHealth`).

    Attributes
    ----------
    service : str
        ``service.name`` of the process.
    instance : str
        ``service.instance.id`` of the process.
    spans : SignalAccount
    logs : SignalAccount or None
        None for a process that sends no log records (the load generator).
    """

    service: str
    instance: str
    spans: SignalAccount
    logs: SignalAccount | None = None

    def describe(self) -> str:
        """One line, e.g. ``"cart-service-0: spans: 10 recorded, ...; log records: ..."``."""
        parts = [self.spans.describe("spans")] + ([self.logs.describe("log records")] if self.logs else [])
        return f"{self.instance}: {'; '.join(parts)}"

    def to_dict(self) -> dict:
        return {"service": self.service, "instance": self.instance, "spans": self.spans.to_dict(),
                "logs": None if self.logs is None else self.logs.to_dict()}

    @classmethod
    def from_dict(cls, doc: dict) -> "ProcessAccount":
        def signal(d):
            return None if d is None else SignalAccount(int(d["recorded"]), int(d["exported"]),
                                                        int(d["export_failed"]))

        return cls(str(doc["service"]), str(doc["instance"]), signal(doc["spans"]), signal(doc.get("logs")))

    def write(self, directory) -> Path:
        """Write to ``<directory>/<instance>-<pid>.json`` (the pid tells two processes of one
        instance name apart: the load generators of an incident run's phases)."""
        path = Path(directory) / f"{self.instance}-{os.getpid()}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict()))
        return path

    @classmethod
    def read_all(cls, directory) -> tuple["ProcessAccount", ...]:
        """Every account written into ``directory`` (none when it does not exist), by instance."""
        paths = sorted(Path(directory).glob("*.json")) if Path(directory).is_dir() else []
        return tuple(sorted((cls.from_dict(json.loads(p.read_text())) for p in paths), key=lambda a: a.instance))
