"""One error taxonomy for the whole system, translated to gRPC status at one boundary.

Adapters turn third-party exceptions (aiormq, redis) into these with `raise ... from exc`;
`guarded` handlers (every service registers through a `Boundary`) turn these into gRPC
statuses with `google.rpc` details.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.protobuf.message import DecodeError
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

log = logging.getLogger(__name__)


class BatchlineError(Exception):
    """Base of every error a client may see; `code` is its canonical gRPC status."""

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL

    def details(self) -> Sequence[Any]:
        """google.rpc detail messages to attach."""
        return ()

    def metadata(self) -> tuple[tuple[str, str], ...]:
        """Extra trailing metadata; through Envoy's transcoder it becomes HTTP headers."""
        return ()


class InvalidArgument(BatchlineError):
    """Bad input: which field, and why."""

    code = grpc.StatusCode.INVALID_ARGUMENT

    def __init__(self, violations: Sequence[tuple[str, str]]) -> None:
        self.violations = list(violations)
        super().__init__("; ".join(f"{field}: {why}" for field, why in self.violations))

    @classmethod
    def field(cls, field: str, why: str) -> InvalidArgument:
        return cls([(field, why)])

    def details(self) -> Sequence[Any]:
        return [
            error_details_pb2.BadRequest(
                field_violations=[
                    error_details_pb2.BadRequest.FieldViolation(field=f, description=d)
                    for f, d in self.violations
                ]
            )
        ]


class NotFound(BatchlineError):
    code = grpc.StatusCode.NOT_FOUND


class QueueFull(BatchlineError):
    """The bounded queue refused the job; try again after `retry_after_s`."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED

    def __init__(self, message: str, retry_after_s: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s

    def details(self) -> Sequence[Any]:
        delay = duration_pb2.Duration()
        delay.FromNanoseconds(int(self.retry_after_s * 1e9))
        return [error_details_pb2.RetryInfo(retry_delay=delay)]

    def metadata(self) -> tuple[tuple[str, str], ...]:
        # HTTP's Retry-After counts whole seconds; round up so a client never retries early.
        return (("retry-after", str(max(1, math.ceil(self.retry_after_s)))),)


class Unauthenticated(BatchlineError):
    """API keys are on and the call carries no valid one."""

    code = grpc.StatusCode.UNAUTHENTICATED


class Unavailable(BatchlineError):
    """A dependency (RabbitMQ, Redis) cannot be reached right now."""

    code = grpc.StatusCode.UNAVAILABLE


class TooSlow(BatchlineError):
    """A stream consumer fell too far behind its bounded buffer."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


def to_rpc_status(exc: BatchlineError) -> grpc.Status:
    """A rich gRPC status (code, message, google.rpc details) for `exc`."""
    packed = []
    for detail in exc.details():
        holder = any_pb2.Any()
        holder.Pack(detail)
        packed.append(holder)
    status = rpc_status.to_status(status_pb2.Status(code=exc.code.value[0], message=str(exc), details=packed))
    return _Status(status.code, status.details, (*status.trailing_metadata, *exc.metadata()))


@dataclass(frozen=True)
class _Status(grpc.Status):
    code: grpc.StatusCode
    details: str
    trailing_metadata: tuple[tuple[str, str | bytes], ...]


INTERNAL_STATUS = rpc_status.to_status(status_pb2.Status(code=code_pb2.INTERNAL, message="internal error"))


# Called first on every call with its method and metadata: raises to refuse it (access checks).
Guard = Callable[[str, Sequence[tuple[str, str | bytes]]], None]


def _open(method: str, metadata: Sequence[tuple[str, str | bytes]]) -> None:
    return None


def guarded(handler: grpc.RpcMethodHandler, method: str, guard: Guard = _open) -> grpc.RpcMethodHandler:  # type: ignore[type-arg]
    """`handler` behind the one boundary: the guard admits the call, BatchlineError -> its
    status, anything else is logged -> INTERNAL, bytes that are not the method's message ->
    INVALID_ARGUMENT."""
    deserializer = _tolerant(handler.request_deserializer)
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(
            _wrap_unary(handler.unary_unary, method, guard),
            request_deserializer=deserializer,
            response_serializer=handler.response_serializer,
        )
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(
            _wrap_stream(handler.unary_stream, method, guard),
            request_deserializer=deserializer,
            response_serializer=handler.response_serializer,
        )
    return handler


class Boundary:
    """What a service's generated `add_*Servicer_to_server` registers on, in place of the
    server: each of its methods goes onto the server already `guarded`, once, at start-up.

    The interceptor this replaced wrapped each call's handler anew: a no-work Submit ran
    about 30,000 instructions more per call behind it than on a bare server, and 10,000 more
    through here (callgrind, docs/benchmarks/ingress-cpu-ab.md)."""

    def __init__(self, server: grpc.aio.Server, guard: Guard = _open) -> None:
        self._server = server
        self._guard = guard

    def add_registered_method_handlers(
        self,
        service: str,
        handlers: dict[str, grpc.RpcMethodHandler],  # type: ignore[type-arg]
    ) -> None:
        """The path grpc takes first: a method it was told of at start-up."""
        self._server.add_registered_method_handlers(  # type: ignore[attr-defined]  # grpc-stubs predates it
            service, {name: guarded(h, f"/{service}/{name}", self._guard) for name, h in handlers.items()}
        )

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:  # type: ignore[type-arg]
        self._server.add_generic_rpc_handlers([_Guarded(h, self._guard) for h in handlers])


class _Guarded(grpc.GenericRpcHandler):  # type: ignore[type-arg]
    """A generic handler's methods `guarded`, each wrapped once, on its first call."""

    def __init__(self, inner: grpc.GenericRpcHandler, guard: Guard) -> None:  # type: ignore[type-arg]
        self._inner = inner
        self._guard = guard
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}  # type: ignore[type-arg]

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:  # type: ignore[type-arg]
        handler = self._inner.service(details)
        if handler is None:
            return None
        method: str = details.method
        known = self._wrapped.get(method)
        if known is None or known[0] is not handler:
            known = self._wrapped[method] = (handler, guarded(handler, method, self._guard))
        return known[1]


@dataclass(frozen=True)
class Undecodable:
    """A request whose bytes are not the method's message (grpc answers those UNKNOWN)."""

    reason: str


def _tolerant(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    """The method's deserializer, returning Undecodable instead of raising on bad bytes."""
    if deserializer is None:
        return None

    def parse(raw: bytes) -> Any:
        try:
            return deserializer(raw)
        except DecodeError as exc:
            return Undecodable(str(exc))

    return parse


def _undecodable(request: Any) -> InvalidArgument | None:
    if isinstance(request, Undecodable):
        return InvalidArgument.field("request", f"not a valid protobuf message: {request.reason}")
    return None


async def _abort(context: Any, exc: Exception, method: str) -> None:
    if isinstance(exc, BatchlineError):
        await context.abort_with_status(to_rpc_status(exc))
    log.error("unhandled error in %s", method, exc_info=exc)
    await context.abort_with_status(INTERNAL_STATUS)


def _wrap_unary(behaviour: Any, method: str, guard: Guard) -> Any:
    async def wrapped(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        try:
            guard(method, tuple(context.invocation_metadata() or ()))
            if bad := _undecodable(request):
                raise bad
            return await behaviour(request, context)
        except Exception as exc:
            if _is_abort(exc):
                raise
            await _abort(context, exc, method)

    return wrapped


def _wrap_stream(behaviour: Any, method: str, guard: Guard) -> Any:
    async def wrapped(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
        try:
            guard(method, tuple(context.invocation_metadata() or ()))
            if bad := _undecodable(request):
                raise bad
            async for response in behaviour(request, context):
                yield response
        except Exception as exc:
            if _is_abort(exc):
                raise
            await _abort(context, exc, method)

    return wrapped


def _is_abort(exc: BaseException) -> bool:
    # context.abort() raises a private AbortError that must propagate untouched.
    return type(exc).__name__ in {"AbortError", "UsageError"} or isinstance(exc, grpc.RpcError)
