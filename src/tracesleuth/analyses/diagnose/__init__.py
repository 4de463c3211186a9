"""Diagnosis: one answer to which service, which operation, which instance, since when, and how sure.

:class:`Diagnosis` finds the onset of an incident in a store's request series, a clean baseline
before it, gathers every kind of evidence per service (times, gaps, structure, errors, logs) and
ranks the services with one calibrated probability each (issue 28). See :mod:`.analysis`; its
decisions are records (:mod:`.notes`).
"""

from .._notes import Note
from .analysis import Diagnosis, DiagnosisResult, Suspect
from .evidence import FAMILIES, Evidence
from .ranking import RankingModel, fit_ranking_model, load_model
from .telemetry import Period, Telemetry
from .timeline import Onset

__all__ = ["FAMILIES", "Diagnosis", "DiagnosisResult", "Evidence", "Note", "Onset", "Period", "RankingModel",
           "Suspect", "Telemetry", "fit_ranking_model", "load_model"]
