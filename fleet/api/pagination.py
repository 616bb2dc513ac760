"""Page-number pagination: ``?page=N`` and ``?page_size=M`` (at most 1000)."""

from rest_framework.pagination import PageNumberPagination


class Pagination(PageNumberPagination):
    """100 rows a page unless ``page_size`` asks for another size."""

    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000
