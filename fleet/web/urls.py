"""The UI's routes (mounted at the site root)."""

from django.urls import path

from fleet.web.views import audit, backends, bench, clusters, digests, failover, tables, versions

app_name = "web"

urlpatterns = [
    path("", clusters.overview, name="overview"),
    path("overview/nodes/", clusters.overview_nodes, name="overview_nodes"),
    path("cluster/", clusters.select_cluster, name="select_cluster"),
    path("tables/<slug:slug>/", tables.table_list, name="table_list"),
    path("tables/<slug:slug>/add/", tables.row_edit, name="row_add"),
    path("tables/<slug:slug>/<int:pk>/", tables.row_edit, name="row_edit"),
    path("tables/<slug:slug>/<int:pk>/delete/", tables.row_delete, name="row_delete"),
    path("publish/", versions.publish_page, name="publish"),
    path("versions/", versions.history, name="history"),
    path("versions/diff/", versions.version_diff, name="diff"),
    path("versions/<int:number>/rollback/", versions.rollback, name="rollback"),
    path("backends/", backends.backends, name="backends"),
    path("backends/table/", backends.backends_table, name="backends_table"),
    path("backends/chart/<slug:metric>.json", backends.chart_data, name="chart_data"),
    path("backends/<int:hostgroup>/<str:server>/", backends.server_page, name="server"),
    path("digests/", digests.digests, name="digests"),
    path("audit/", audit.audit_log, name="audit"),
    path("failover/", failover.topology, name="failover"),
    path("failover/live/", failover.topology_live, name="failover_live"),
    path("failover/<int:writer_hostgroup>/settings/", failover.policy, name="failover_policy"),
    path("failover/<int:writer_hostgroup>/switchover/", failover.switchover, name="failover_switchover"),
    path("failover/<int:writer_hostgroup>/rejoin/", failover.rejoin, name="failover_rejoin"),
    path("failover/events/", failover.events, name="failover_events"),
    path("failover/events/<int:pk>/", failover.event, name="failover_event"),
    path("failover/events/<int:pk>/acknowledge/", failover.acknowledge, name="failover_acknowledge"),
    path("failover/history/", failover.transitions, name="failover_transitions"),
    path("bench/", bench.jobs, name="bench_jobs"),
    path("bench/jobs/new/", bench.job_edit, name="bench_job_new"),
    path("bench/jobs/<int:pk>/", bench.job_page, name="bench_job"),
    path("bench/jobs/<int:pk>/edit/", bench.job_edit, name="bench_job_edit"),
    path("bench/jobs/<int:pk>/run/", bench.job_run, name="bench_job_run"),
    path("bench/jobs/<int:pk>/delete/", bench.job_delete, name="bench_job_delete"),
    path("bench/jobs/<int:pk>/history.json", bench.job_history, name="bench_job_history"),
    path("bench/runs/<int:pk>/", bench.run_page, name="bench_run"),
    path("bench/runs/<int:pk>/status/", bench.run_status, name="bench_run_status"),
    path("bench/runs/<int:pk>/charts.json", bench.run_charts, name="bench_run_charts"),
    path("bench/runs/<int:pk>/cancel/", bench.run_cancel, name="bench_run_cancel"),
    path("bench/runs/<int:pk>/export/<str:what>", bench.run_export, name="bench_run_export"),
    path("bench/targets/", bench.targets, name="bench_targets"),
    path("bench/targets/new/", bench.target_edit, name="bench_target_new"),
    path("bench/targets/<int:pk>/edit/", bench.target_edit, name="bench_target_edit"),
    path("bench/targets/<int:pk>/delete/", bench.target_delete, name="bench_target_delete"),
]
