"""botocore errors -> agentstores errors, at the adapter edge."""

from __future__ import annotations

from botocore import exceptions as bx

from agentstores.errors import AgentStoresError, BackendUnavailableError, UnsupportedError

from .client import error_code

_THROTTLED = {"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "503"}
_UNSUPPORTED = {"NotImplemented", "501"}


def translate(exc: Exception) -> AgentStoresError | None:
    """The typed error for a driver failure; None lets a real bug propagate unchanged.
    Credentials never appear in a message: botocore's messages do not carry them."""
    if isinstance(exc, bx.ClientError):
        code = error_code(exc)
        if code in _THROTTLED:
            return BackendUnavailableError(
                f"S3 throttled the request ({code}) after every retry", exhausted=True
            )
        if code in _UNSUPPORTED:
            return UnsupportedError(f"this S3 endpoint does not implement the request: {code}")
        if code in ("NoSuchBucket", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
            return BackendUnavailableError(f"S3 refused the request: {code}")
        return BackendUnavailableError(f"S3 error {code}: {exc}")
    if isinstance(exc, bx.NoCredentialsError | bx.PartialCredentialsError):
        return BackendUnavailableError(f"no S3 credentials: {type(exc).__name__}")
    if isinstance(exc, bx.BotoCoreError | OSError):
        return BackendUnavailableError(f"S3 unavailable: {type(exc).__name__}: {exc}")
    return None


__all__ = ["translate"]
