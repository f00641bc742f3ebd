//! A bound on requests in flight.
//!
//! A request holds a permit from the moment it is accepted until its response body has been
//! sent or dropped — an SSE stream holds one for as long as it is open, since that is when the
//! work behind it happens. When every permit is taken, the next request is answered at once
//! with 503 and `Retry-After: 1`: nothing queues, so an overload never turns into unbounded
//! memory or into answers that arrive after the client stopped waiting.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The axum middleware.
pub(super) async fn layer(
    State(permits): State<Arc<Semaphore>>,
    req: Request,
    next: Next,
) -> Response {
    let Ok(permit) = permits.try_acquire_owned() else {
        tracing::warn!("HTTP request refused: too many requests in flight");
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "1")],
            "too many requests in flight; retry in a second\n",
        )
            .into_response();
    };
    next.run(req).await.map(|inner| {
        Body::new(Held {
            inner,
            _permit: permit,
        })
    })
}

/// A response body that returns its permit when it is finished or dropped.
struct Held {
    inner: Body,
    _permit: OwnedSemaphorePermit,
}

impl http_body::Body for Held {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
