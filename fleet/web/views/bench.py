"""Benchmark pages: jobs (run now, schedule), targets, and each run live: its progress, its charts (tps and latency
over time, tps against connections, each target against the first, the job across config versions), its steps'
per-statement reports, cancel, and CSV/JSON export."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.db.models import OuterRef, Subquery
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from fleet.bench import editing, export, service
from fleet.bench.models import BenchJob, BenchRun, BenchTarget
from fleet.web.access import operator_action, operator_only, viewer_page
from fleet.web.forms import show_model_errors
from fleet.web.forms.bench import JobForm, TargetForm

#: Runs the jobs page and a job's page list.
RECENT_RUNS = 25


@viewer_page
def jobs(request: HttpRequest) -> HttpResponse:
    """Every job with its last run, and the latest runs of all jobs."""
    latest = BenchRun.objects.filter(job=OuterRef("pk")).order_by("-created_at", "-pk")
    context = {
        "jobs": BenchJob.objects.prefetch_related("target_links__target").annotate(
            last_run_id=Subquery(latest.values("pk")[:1]),
            last_run_status=Subquery(latest.values("status")[:1]),
            last_run_at=Subquery(latest.values("created_at")[:1]),
        ),
        "runs": BenchRun.objects.select_related("job")[:RECENT_RUNS],
    }
    return render(request, "web/bench/jobs.html", context)


@operator_only
def job_edit(request: HttpRequest, pk: int | None = None) -> HttpResponse:
    """Create or change a job (its plan is checked as the engine will run it; its schedule goes to beat)."""
    job = get_object_or_404(BenchJob, pk=pk) if pk is not None else BenchJob()
    form = JobForm(request.POST or None, instance=job)
    if request.method == "POST" and form.is_valid():
        try:
            saved = editing.save_job(form.save(commit=False), form.cleaned_data["targets"], request.user)
        except ValidationError as error:
            show_model_errors(form, error)
        else:
            messages.success(request, f"Saved job {saved.name}.")
            return redirect("web:bench_job", pk=saved.pk)
    return render(request, "web/bench/job_form.html", {"form": form, "job": job})


@viewer_page
def job_page(request: HttpRequest, pk: int) -> HttpResponse:
    """A job: its settings, its runs, Run now, and its throughput across config versions."""
    job = get_object_or_404(BenchJob.objects.select_related("cluster", "periodic_task"), pk=pk)
    context = {"job": job, "targets": job.ordered_targets(), "runs": job.runs.all()[:RECENT_RUNS]}
    return render(request, "web/bench/job.html", context)


@require_POST
@operator_action
def job_run(request: HttpRequest, pk: int) -> HttpResponse:
    """Queue a run of the job now."""
    run = service.queue_run(get_object_or_404(BenchJob, pk=pk), request.user)
    messages.success(request, f"Run {run.pk} queued for the bench worker.")
    return redirect("web:bench_run", pk=run.pk)


@require_POST
@operator_action
def job_delete(request: HttpRequest, pk: int) -> HttpResponse:
    """Delete a job with its runs and schedule."""
    job = get_object_or_404(BenchJob, pk=pk)
    editing.delete_job(job, request.user)
    messages.success(request, f"Deleted job {job.name}.")
    return redirect("web:bench_jobs")


@viewer_page
def job_history(request: HttpRequest, pk: int) -> JsonResponse:
    """The job's finished runs: each target's mean tps per run, with the config version it ran against."""
    return JsonResponse(export.across_versions(get_object_or_404(BenchJob, pk=pk)))


@viewer_page
def run_page(request: HttpRequest, pk: int) -> HttpResponse:
    """A run: live status and progress, its charts, its steps and their per-statement reports."""
    run = get_object_or_404(BenchRun.objects.select_related("job", "cluster"), pk=pk)
    return render(request, "web/bench/run.html", {"run": run, **_run_context(run)})


@viewer_page
def run_status(request: HttpRequest, pk: int) -> HttpResponse:
    """The run's status and steps (htmx polls it while the run goes)."""
    run = get_object_or_404(BenchRun.objects.select_related("job"), pk=pk)
    return render(request, "web/bench/partials/run_status.html", {"run": run, **_run_context(run)})


def _run_context(run: BenchRun) -> dict[str, object]:
    steps = list(run.steps.order_by("index"))
    return {"steps": steps, "done_steps": len(steps), "live": not run.finished}


@viewer_page
def run_charts(request: HttpRequest, pk: int) -> JsonResponse:
    """The run's chart data: the timeline (``?after=`` point id for what is new) and the sweep."""
    run = get_object_or_404(BenchRun, pk=pk)
    after = request.GET.get("after", "0")
    data = {
        "status": run.status,
        "timeline": export.timeline(run, int(after) if after.isdigit() else 0),
        "sweep": export.sweep(run),
    }
    return JsonResponse(data)


@require_POST
@operator_action
def run_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    """Cancel the run (a queued one at once, a running one after its transactions in flight)."""
    run = service.request_cancel(get_object_or_404(BenchRun, pk=pk))
    if run.status == BenchRun.Status.CANCELLED:
        messages.success(request, f"Run {run.pk} cancelled.")
    elif run.finished:
        messages.info(request, f"Run {run.pk} had already ended ({run.status}).")
    else:
        messages.success(request, f"Run {run.pk} is stopping; its tables are dropped before it ends.")
    return redirect("web:bench_run", pk=run.pk)


@viewer_page
def run_export(request: HttpRequest, pk: int, what: str) -> HttpResponse:
    """``steps.csv``, ``series.csv`` or ``result.json``."""
    run = get_object_or_404(BenchRun.objects.select_related("job", "cluster"), pk=pk)
    if what == "result.json":
        response: HttpResponse = JsonResponse(export.result_document(run), json_dumps_params={"indent": 2})
    elif what in ("steps.csv", "series.csv"):
        text = export.steps_csv(run) if what == "steps.csv" else export.series_csv(run)
        response = HttpResponse(text, content_type="text/csv")
    else:
        raise Http404(f"no export {what!r} (steps.csv, series.csv, result.json)")
    response["Content-Disposition"] = f'attachment; filename="bench-run-{run.pk}-{what}"'
    return response


@viewer_page
def targets(request: HttpRequest) -> HttpResponse:
    """Every target (never its password)."""
    return render(request, "web/bench/targets.html", {"targets": BenchTarget.objects.select_related("node")})


@operator_only
def target_edit(request: HttpRequest, pk: int | None = None) -> HttpResponse:
    """Create or change a target."""
    target = get_object_or_404(BenchTarget, pk=pk) if pk is not None else BenchTarget()
    form = TargetForm(request.POST or None, instance=target)
    if request.method == "POST" and form.is_valid():
        try:
            saved = editing.save_target(form.save(commit=False), request.user)
        except ValidationError as error:
            show_model_errors(form, error)
        else:
            messages.success(request, f"Saved target {saved.name}.")
            return redirect("web:bench_targets")
    return render(request, "web/bench/target_form.html", {"form": form, "target": target})


@require_POST
@operator_action
def target_delete(request: HttpRequest, pk: int) -> HttpResponse:
    """Delete a target no job uses."""
    target = get_object_or_404(BenchTarget, pk=pk)
    try:
        editing.delete_target(target, request.user)
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
    else:
        messages.success(request, f"Deleted target {target.name}.")
    return redirect("web:bench_targets")
