"""What the API's views share: the cluster a request works on (``?cluster=NAME``), the ``?secrets=1`` switch, and
the answers for refused and invalid requests."""

from __future__ import annotations

from functools import cached_property

from django.core.exceptions import NON_FIELD_ERRORS
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from fleet.core.models import Cluster
from fleet.core.roles import can_admin

CLUSTER_PARAMETER = OpenApiParameter(
    "cluster", str, description="the cluster's name (default: the first cluster by name)"
)
SECRETS_PARAMETER = OpenApiParameter(
    "secrets", bool, description="admins only: 1 to get the real passwords (for re-import), else they are masked"
)


def resolve_cluster(request: Request) -> Cluster:
    """The cluster named by ``?cluster=``, or the first one by name; 404 naming what is missing."""
    name = request.query_params.get("cluster")
    if name:
        cluster = Cluster.objects.filter(name=name).first()
        if cluster is None:
            raise NotFound(f"no cluster named {name!r}")
        return cluster
    cluster = Cluster.objects.order_by("name").first()
    if cluster is None:
        raise NotFound("there is no cluster yet; create one with POST /api/v1/clusters/")
    return cluster


def wants_secrets(request: Request) -> bool:
    """Whether the request asks for real passwords (``?secrets=1``); 403 unless an admin asks."""
    if request.query_params.get("secrets", "").lower() not in ("1", "true", "yes"):
        return False
    if not can_admin(request.user):
        raise PermissionDenied("only admins may read passwords (secrets=1)")
    return True


def refused(errors: list[str]) -> Response:
    """A 400 listing why a publish, rollback or import was refused."""
    return Response({"errors": errors}, status=status.HTTP_400_BAD_REQUEST)


class ClusterScoped:
    """A view working on one cluster: ``?cluster=NAME`` or the first one."""

    request: Request

    def cluster(self) -> Cluster:
        """The cluster this request works on (looked up once)."""
        return self._cluster

    @cached_property
    def _cluster(self) -> Cluster:
        return resolve_cluster(self.request)


def drf_error(error: DjangoValidationError) -> serializers.ValidationError:
    """A model validation error as DRF's ``{field: [messages]}`` (whole-row errors under ``non_field_errors``)."""
    if not hasattr(error, "error_dict"):
        return serializers.ValidationError({"non_field_errors": error.messages})
    return serializers.ValidationError(
        {("non_field_errors" if k == NON_FIELD_ERRORS else k): v for k, v in error.message_dict.items()}
    )
