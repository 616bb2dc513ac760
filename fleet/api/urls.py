"""The API's routes, mounted at ``/api/v1/``."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from fleet.api import failover, hotrows, mirror, scatter, views
from fleet.api.bench import BenchJobViewSet, BenchRunViewSet, BenchTargetViewSet

router = DefaultRouter()
router.register("clusters", views.ClusterViewSet, basename="clusters")
for slug, viewset in views.TABLE_VIEWSETS.items():
    router.register(slug, viewset, basename=slug)
router.register("nodes", views.NodeViewSet, basename="nodes")
router.register("versions", views.VersionViewSet, basename="versions")
router.register("accounts", views.AccountViewSet, basename="accounts")
router.register("failover", failover.FailoverViewSet, basename="failover")
router.register("failover-events", failover.EventViewSet, basename="failover-events")
router.register("backend-transitions", failover.TransitionViewSet, basename="backend-transitions")
router.register("bench/targets", BenchTargetViewSet, basename="bench-targets")
router.register("bench/jobs", BenchJobViewSet, basename="bench-jobs")
router.register("bench/runs", BenchRunViewSet, basename="bench-runs")

app_name = "api"

urlpatterns = [
    path("auth/token/", views.TokenView.as_view(), name="token"),
    path("publish/", views.PublishView.as_view(), name="publish"),
    path("rules/test/", views.RuleTestView.as_view(), name="rule-test"),
    path("shards/locate/", views.ShardLocateView.as_view(), name="shard-locate"),
    path("export/", views.ExportView.as_view(), name="export"),
    path("import/", views.ImportView.as_view(), name="import"),
    path("import-cnf/", views.ImportCnfView.as_view(), name="import-cnf"),
    path("stats/nodes/<str:name>/", views.NodeStatsView.as_view(), name="node-stats"),
    path("stats/sharding/", scatter.ShardingDigestsView.as_view(), name="sharding-digests"),
    path("stats/hot_rows/", hotrows.HotRowsView.as_view(), name="hot-rows"),
    path("stats/hot_rows/accept/", hotrows.AcceptProposalView.as_view(), name="hot-rows-accept"),
    path("mirror/", mirror.MirrorView.as_view(), name="mirror"),
    path("mirror/history/", mirror.MirrorHistoryView.as_view(), name="mirror-history"),
    path("", include(router.urls)),
]
