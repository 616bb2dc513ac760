"""Benchmark targets, jobs and runs in the Django admin (read-mostly; the UI and the API are where jobs are run)."""

from django.contrib import admin

from fleet.bench.models import BenchJob, BenchRun, BenchTarget


@admin.register(BenchTarget)
class BenchTargetAdmin(admin.ModelAdmin):
    """Targets, their password never shown."""

    list_display = ("name", "kind", "host", "port", "user", "database", "safe_for_writes")
    exclude = ("password",)


@admin.register(BenchJob)
class BenchJobAdmin(admin.ModelAdmin):
    """Jobs (their schedule is kept in step with beat on save)."""

    list_display = ("name", "workload", "connections", "schedule", "enabled")

    def save_model(self, request, obj, form, change):  # type: ignore[no-untyped-def]
        super().save_model(request, obj, form, change)
        obj.sync_schedule()


@admin.register(BenchRun)
class BenchRunAdmin(admin.ModelAdmin):
    """Runs, read-only."""

    list_display = ("pk", "job", "status", "trigger", "config_version", "created_at", "finished_at")
    readonly_fields = [f.name for f in BenchRun._meta.fields]
