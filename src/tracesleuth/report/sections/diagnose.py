"""The report's first section: the diagnosis, the answer before the evidence (issue 28, Build 4).

Which service, which operation or log statement, which instance, since when and how sure; then the
other suspects, the evidence of the first, the request latency over time with the onset, the
problem period and the baseline marked, and the decisions (periods, caveats). Nothing here refits.
"""

from __future__ import annotations

from ..document import Bullets, Code, Figure, KeyValues, Section, Strong, Table, Text

__all__ = ["agreement", "agreement_section", "build_sections", "diagnosis_section"]

#: Other suspects listed in the table.
SUSPECTS_SHOWN = 5


def diagnosis_section(result, requests=None) -> Section:
    """The diagnosis section of a :class:`~tracesleuth.analyses.diagnose.analysis.DiagnosisResult`.

    Parameters
    ----------
    result : DiagnosisResult
    requests : polars.DataFrame, optional
        ``start_ns`` and ``latency_ns`` of the requests around the incident (the fitted
        estimator's ``requests_``): adds the latency over time with the periods marked.

    Returns
    -------
    Section
    """
    section = Section("Diagnosis: which service, since when, how sure", key="diagnosis")
    section.add(Text([Strong(_headline(result))]))
    facts = [("verdict", result.verdict)]
    if result.services:
        top = result.services[0]
        facts += [("service", Code(top.service)), ("confidence", f"{top.confidence:.2f}"),
                  ("what changed", ", ".join(top.operations[:3]) or "—"),
                  ("instances", ", ".join(top.instances[:3]) or "—")]
    if result.onset is not None:
        weak = "" if result.onset.significant else "; uncertain: not significant once every series tested is counted"
        onset = result.onset.to_dict()
        resumed = "" if onset["break"] is None else f"; under way when the traffic resumed at {onset['break']['to']}"
        facts.append(("since", f"{onset['time']} ({result.onset.series}{weak}{resumed})"))
    facts.append(("probability that nobody is to blame", f"{result.nobody:.2f}"))
    section.add(KeyValues(facts))
    if result.services:
        section.add(Table(["rank", "service", "confidence", "what changed", "evidence"],
                          [[i + 1, Code(s.service), s.confidence, ", ".join(s.operations[:2]),
                            ", ".join(e.family.replace("_", " ") for e in s.evidence[:3])]
                           for i, s in enumerate(result.services[:SUSPECTS_SHOWN])],
                          caption="Suspects, most suspicious first (confidence: probability of being the culprit)"))
        section.add(Bullets([e.describe() for e in result.services[0].evidence[:6]]))
    if requests is not None and requests.height:
        section.add(_timeline_figure(result, requests))
    section.add(Bullets([str(n) for n in result.notes if n.kind != "verdict"]))
    return section


def _headline(result) -> str:
    if result.verdict == "named":
        top = result.services[0]
        return f"{top.service} (confidence {top.confidence:.2f})"
    if result.verdict == "uncertain":
        return f"Nobody can be named: {result.reason}. Suspects: " + ", ".join(
            f"{s.service} ({s.confidence:.2f})" for s in result.services[:3])
    return f"Too thin to name anyone: {result.reason}"


def _timeline_figure(result, requests):
    from ..figures import latency_over_time_figure

    events = []
    if result.onset is not None:
        events.append((result.onset.time_ns, "onset"))
    events += [(result.baseline.start_ns, "baseline"), (result.problem.end_ns, "problem end")]
    figure = latency_over_time_figure(requests["start_ns"].to_numpy(), requests["latency_ns"].to_numpy(),
                                      events=events, title="Request latency over time")
    return Figure(figure, caption="Requests by start time and latency; the onset, the baseline's start and the "
                                  "problem period's end are marked.")


def build_sections(fitted, context=None) -> list:
    """The report sections of a fitted :class:`~tracesleuth.analyses.diagnose.analysis.Diagnosis` (one)."""
    return [diagnosis_section(fitted.result_, getattr(fitted, "requests_", None))]


def agreement(result, others: dict) -> tuple[dict, ...]:
    """Whether each other analysis's first service is the diagnosis's, and where it stands in it.

    Parameters
    ----------
    result : DiagnosisResult
    others : dict of str to result
        Analysis name -> its result; those with a ``services`` ranking (objects with a
        ``service`` attribute, most suspicious first) are compared, the others left out.

    Returns
    -------
    tuple of dict
        One per compared analysis: ``analysis``, ``first`` (its first service or None),
        ``agrees`` (bool: the same first service as the diagnosis), ``diagnosis_rank`` (that
        service's rank in the diagnosis, 1-based, None when the diagnosis has no evidence on it),
        ``diagnosis_confidence`` and ``why`` (one sentence a report shows).
    """
    names = [s.service for s in result.services]
    mine = names[0] if names else None
    rows = []
    for name, other in others.items():
        ranked = getattr(other, "services", None)
        if ranked is None:
            continue
        first = ranked[0].service if ranked else None
        rank = names.index(first) + 1 if first in names else None
        confidence = result.services[rank - 1].confidence if rank else None
        if first is None:
            why = f"{name} ranks no service"
        elif first == mine:
            why = f"{name} also ranks {first} first"
        elif rank is None:
            why = (f"{name} ranks {first} first; the diagnosis found no evidence on it between its baseline and "
                   "problem period (the other analysis reads one period, or compares other periods)")
        else:
            why = (f"{name} ranks {first} first on its own evidence alone; the diagnosis, weighing every kind of "
                   f"evidence, ranks it {rank} with confidence {confidence:.2f}")
        rows.append({"analysis": name, "first": first, "agrees": first is not None and first == mine,
                     "diagnosis_rank": rank, "diagnosis_confidence": confidence, "why": why})
    return tuple(rows)


def agreement_section(result, others: dict) -> Section | None:
    """A short section after the analyses: do they name the diagnosis's service, and if not, why
    (:func:`agreement`); None when no other analysis ranks services."""
    rows = agreement(result, others)
    if not rows:
        return None
    section = Section("Do the analyses agree with the diagnosis?", key="agreement")
    section.add(Table(["analysis", "first service", "agrees", "in the diagnosis"],
                      [[r["analysis"], Code(r["first"] or "—"), "yes" if r["agrees"] else "no",
                        "—" if r["diagnosis_rank"] is None else
                        f"rank {r['diagnosis_rank']}, confidence {r['diagnosis_confidence']:.2f}"] for r in rows]))
    section.add(Bullets([r["why"] for r in rows]))
    return section
