"""The API's benchmark resources (``fleet.bench``): targets, jobs and runs under ``/api/v1/bench/``.

Viewers read everything (target passwords never); operators create, change and delete targets and jobs, start a
job's run (``POST bench/jobs/{id}/run/``) and cancel one (``POST bench/runs/{id}/cancel/``). A run's results come as
its summary, its per-interval ``series``, and ``export/?what=steps|series`` (CSV) or ``export/?what=result`` (JSON).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import models
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from fleet.api.common import drf_error
from fleet.bench import editing, export, service
from fleet.bench.engine.plans import workload_names
from fleet.bench.models import BenchJob, BenchRun, BenchTarget, RunStep
from fleet.core.models import Cluster, ProxyNode


def _by_name(queryset: models.QuerySet) -> serializers.SlugRelatedField:
    """An optional reference by name."""
    return serializers.SlugRelatedField(slug_field="name", queryset=queryset, required=False, allow_null=True)


class BenchTargetSerializer(serializers.ModelSerializer):
    """A target; its password is write-only (left out of a PUT or PATCH, it is kept)."""

    password = serializers.CharField(write_only=True, required=False, allow_blank=True, trim_whitespace=False)
    cluster = serializers.SlugRelatedField(
        slug_field="name", queryset=Cluster.objects.all(), required=False, allow_null=True
    )
    node = serializers.SlugRelatedField(
        slug_field="name", queryset=ProxyNode.objects.all(), required=False, allow_null=True
    )

    class Meta:
        model = BenchTarget
        fields = [
            "id", "name", "kind", "host", "port", "user", "password", "database", "safe_for_writes", "cluster", "node",
            "comment",
        ]  # fmt: skip
        validators: list[Any] = []  # the model's own checks run in editing.save_target

    def create(self, validated_data: dict[str, Any]) -> BenchTarget:
        return self._save(BenchTarget(**validated_data))

    def update(self, instance: BenchTarget, validated_data: dict[str, Any]) -> BenchTarget:
        for name, value in validated_data.items():
            setattr(instance, name, value)
        return self._save(instance)

    def _save(self, target: BenchTarget) -> BenchTarget:
        try:
            return editing.save_target(target, self.context["request"].user)
        except DjangoValidationError as error:
            raise drf_error(error) from None


class BenchJobSerializer(serializers.ModelSerializer):
    """A job: its workload, targets (names, in order), sweep, numbers and crontab schedule."""

    workload = serializers.ChoiceField(choices=workload_names())
    targets = serializers.ListField(child=serializers.CharField(), min_length=1, write_only=True)
    target_names = serializers.SerializerMethodField()
    cluster = serializers.SlugRelatedField(
        slug_field="name", queryset=Cluster.objects.all(), required=False, allow_null=True
    )
    last_run = serializers.SerializerMethodField()

    class Meta:
        model = BenchJob
        fields = [
            "id", "name", "cluster", "workload", "script", "targets", "target_names", "connections", "duration",
            "events", "warmup", "rate", "interval", "rounds", "rows", "batch", "processes", "time_limit", "schedule",
            "enabled", "created_at", "updated_at", "last_run",
        ]  # fmt: skip
        validators: list[Any] = []

    def get_target_names(self, job: BenchJob) -> list[str]:
        return [t.name for t in job.ordered_targets()]

    def get_last_run(self, job: BenchJob) -> dict[str, Any] | None:
        run = job.runs.order_by("-created_at", "-pk").first()
        return None if run is None else {"id": run.pk, "status": run.status, "created_at": run.created_at}

    def to_representation(self, job: BenchJob) -> dict[str, Any]:
        data = super().to_representation(job)
        data["targets"] = data.pop("target_names")
        return data

    def _targets(self, names: list[str]) -> list[BenchTarget]:
        found = {t.name: t for t in BenchTarget.objects.filter(name__in=names)}
        missing = [n for n in names if n not in found]
        if missing:
            raise serializers.ValidationError({"targets": [f"no target named {missing[0]!r}"]})
        return [found[n] for n in names]

    def create(self, validated_data: dict[str, Any]) -> BenchJob:
        targets = self._targets(validated_data.pop("targets"))
        return self._save(BenchJob(**validated_data), targets)

    def update(self, instance: BenchJob, validated_data: dict[str, Any]) -> BenchJob:
        names = validated_data.pop("targets", None)
        targets = self._targets(names) if names is not None else instance.ordered_targets()
        for name, value in validated_data.items():
            setattr(instance, name, value)
        return self._save(instance, targets)

    def _save(self, job: BenchJob, targets: list[BenchTarget]) -> BenchJob:
        try:
            return editing.save_job(job, targets, self.context["request"].user)
        except DjangoValidationError as error:
            raise drf_error(error) from None


class RunStepSerializer(serializers.ModelSerializer):
    """One step's summary: totals, latency percentiles, per-statement report, errors by code."""

    class Meta:
        model = RunStep
        exclude = ["id", "run"]


class BenchRunSerializer(serializers.ModelSerializer):
    """A run: status, when, against which config version, its progress while running, errors and notes."""

    job = serializers.SlugRelatedField(slug_field="name", read_only=True)
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = BenchRun
        fields = [
            "id", "job", "status", "trigger", "cancel_requested", "created_at", "started_at", "finished_at", "workload",
            "targets", "settings", "cluster", "config_version", "config_note", "steps_total", "progress", "error",
            "notes",
        ]  # fmt: skip
        read_only_fields = fields


class BenchRunDetailSerializer(BenchRunSerializer):
    """A run with its steps' summaries."""

    steps = RunStepSerializer(many=True, read_only=True)

    class Meta(BenchRunSerializer.Meta):
        fields = [*BenchRunSerializer.Meta.fields, "steps"]
        read_only_fields = fields


class BenchTargetViewSet(viewsets.ModelViewSet):
    """Benchmark targets: a server or a proxy node; only those marked safe take workloads that write."""

    queryset = BenchTarget.objects.select_related("cluster", "node")
    serializer_class = BenchTargetSerializer
    filterset_fields = ["kind", "safe_for_writes"]

    def perform_destroy(self, instance: BenchTarget) -> None:
        try:
            editing.delete_target(instance, self.request.user)
        except DjangoValidationError as error:
            raise drf_error(error) from None


class BenchJobViewSet(viewsets.ModelViewSet):
    """Benchmark jobs; ``POST {id}/run/`` queues a run on the bench worker."""

    queryset = BenchJob.objects.select_related("cluster").prefetch_related("target_links__target")
    serializer_class = BenchJobSerializer
    filterset_fields = ["workload", "enabled"]

    def perform_destroy(self, instance: BenchJob) -> None:
        editing.delete_job(instance, self.request.user)

    @extend_schema(request=None, responses={201: BenchRunSerializer})
    @action(detail=True, methods=["post"])
    def run(self, request: Request, pk: str | None = None) -> Response:
        """Queue a run of the job now (the bench worker takes it)."""
        run = service.queue_run(self.get_object(), request.user)
        return Response(BenchRunSerializer(run).data, status=status.HTTP_201_CREATED)


class BenchRunViewSet(viewsets.ReadOnlyModelViewSet):
    """Runs, newest first (``?job=ID``, ``?status=``); the detail holds the steps' summaries."""

    queryset = BenchRun.objects.select_related("job", "cluster")
    filterset_fields = ["job", "status", "trigger"]
    ordering_fields = ["created_at", "finished_at"]

    def get_queryset(self) -> models.QuerySet:
        runs = super().get_queryset()
        return runs.prefetch_related("steps") if self.action == "retrieve" else runs

    def get_serializer_class(self) -> type[serializers.Serializer]:
        return BenchRunDetailSerializer if self.action == "retrieve" else BenchRunSerializer

    @extend_schema(request=None, responses=BenchRunSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Cancel the run: a queued one at once, a running one after its transactions in flight (its tables are
        still dropped); a finished run is left as it is."""
        return Response(BenchRunSerializer(service.request_cancel(self.get_object())).data)

    @extend_schema(
        parameters=[OpenApiParameter("after", int, description="only points after this id (live polling)")],
        responses=OpenApiTypes.OBJECT,
    )
    @action(detail=True, methods=["get"])
    def series(self, request: Request, pk: str | None = None) -> Response:
        """The per-interval series (tps, p95) of every step, and tps against connections and the first target."""
        after = request.query_params.get("after", "0")
        run = self.get_object()
        return Response(
            {"timeline": export.timeline(run, int(after) if after.isdigit() else 0), "sweep": export.sweep(run)}
        )

    @extend_schema(
        parameters=[OpenApiParameter("what", str, enum=["steps", "series", "result"], description="what to export")],
        responses={(200, "text/csv"): OpenApiTypes.STR, (200, "application/json"): OpenApiTypes.OBJECT},
    )
    @action(detail=True, methods=["get"])
    def export(self, request: Request, pk: str | None = None) -> HttpResponse | Response:
        """``what=steps``: a CSV line per step; ``series``: a CSV line per interval; ``result``: the JSON document."""
        run = self.get_object()
        what = request.query_params.get("what", "result")
        if what == "result":
            return Response(export.result_document(run))
        if what not in ("steps", "series"):
            return Response({"what": ["expected steps, series or result"]}, status=status.HTTP_400_BAD_REQUEST)
        text = export.steps_csv(run) if what == "steps" else export.series_csv(run)
        response = HttpResponse(text, content_type="text/csv")
        response["Content-Disposition"] = f'attachment; filename="bench-run-{run.pk}-{what}.csv"'
        return response
