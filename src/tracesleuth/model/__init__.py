"""The trace model: assembling spans into trees and the per-request trace table."""

from ._calls import synchronous_children
from .assembly import AssemblyReport, assemble
from .table import TraceTable, build_trace_table, root_tables

__all__ = ["AssemblyReport", "TraceTable", "assemble", "build_trace_table", "root_tables", "synchronous_children"]
