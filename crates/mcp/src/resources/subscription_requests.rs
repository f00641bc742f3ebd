//! The subscription requests of both protocol generations: `resources/subscribe` and
//! `resources/unsubscribe` (2025), `subscriptions/listen` (2026-07-28). They decide what may be
//! watched and hand the watching to [`Subscriptions`](super::Subscriptions).

use super::subscriptions::{Owner, Sink, Source};
use super::{NO_SUCH_RESOURCE, Uri, not_found};
use crate::Server;
use rmcp::model::{SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer};

impl Server {
    /// What a subscription to `uri` watches, or why it cannot be subscribed.
    async fn source(&self, uri: &str) -> Result<Source, McpError> {
        match Uri::parse(uri) {
            Some(Uri::State(id)) => self
                .engine
                .watch_device(&id)
                .map(Source::device)
                .ok_or_else(|| not_found(uri, &self.no_device_text())),
            Some(Uri::Config(id)) => match self.engine.plant().device(&id) {
                Some(_) => Ok(Source::fixed()),
                None => Err(not_found(uri, &self.no_device_text())),
            },
            Some(Uri::Command(id) | Uri::Timeline(id, _)) => self
                .command_result(uri, &id)
                .await
                .map(|_| Source::command(id, &self.engine)),
            Some(Uri::Alarms) => self
                .active_alarms(uri)
                .map(|_| Source::alarms(self.engine.watch_alarms())),
            None => Err(not_found(uri, NO_SUCH_RESOURCE)),
        }
    }

    /// `resources/subscribe` (2025): watches `uri` for this client until it unsubscribes or
    /// goes away; subscribing twice to one URI is one subscription.
    pub(crate) async fn subscribe_impl(
        &self,
        request: SubscribeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.check_read(&cx, "subscribe to resources")?;
        let source = self.source(&request.uri).await?;
        let owner = Owner::client(&cx.peer);
        self.subscriptions
            .add(request.uri, owner, source, Sink::Peer(cx.peer.clone()))
    }

    /// `resources/unsubscribe` (2025): ends this client's subscription to `uri`, if any.
    pub(crate) async fn unsubscribe_impl(
        &self,
        request: UnsubscribeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        // Unknown or never-subscribed URIs are fine: unsubscribing is idempotent.
        self.subscriptions
            .remove_matching(&request.uri, &Owner::client(&cx.peer));
        Ok(())
    }

    /// `subscriptions/listen` (2026-07-28): the part of the requested filter this server can
    /// serve — resource updates for its own URIs. List-changed notifications are not offered:
    /// the tool, prompt and resource lists are fixed by the plant file.
    pub(crate) fn accepted_subscription_filter_impl(
        &self,
        requested: &SubscriptionFilter,
    ) -> SubscriptionFilter {
        let plant = self.engine.plant();
        let ours = requested
            .resource_subscriptions
            .iter()
            .flatten()
            .filter(|uri| match Uri::parse(uri) {
                Some(Uri::State(id) | Uri::Config(id)) => plant.device(&id).is_some(),
                Some(Uri::Command(_) | Uri::Timeline(..)) => true,
                Some(Uri::Alarms) => !plant.alarms.is_empty(),
                None => false,
            })
            .cloned()
            .collect::<Vec<_>>();
        if ours.is_empty() {
            SubscriptionFilter::new()
        } else {
            SubscriptionFilter::builder()
                .resource_subscriptions(ours)
                .build()
        }
    }

    /// `subscriptions/listen` (2026-07-28): streams `notifications/resources/updated` for the
    /// accepted URIs until the client cancels the request or goes away.
    pub(crate) async fn listen_impl(&self, context: SubscriptionContext) -> Result<(), McpError> {
        self.check_read(context.request_context(), "subscribe to resources")?;
        let uris = context
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        let owner = self.subscriptions.listen_owner();
        // Removes this stream's watchers however the request ends (cancelled, dropped, error).
        let _guard = self.subscriptions.guard(owner.clone());
        for uri in uris {
            let source = match self.source(&uri).await {
                Ok(s) => s,
                // A command id that was accepted by shape but does not exist: nothing to watch.
                Err(e) if e.code == rmcp::model::ErrorCode::RESOURCE_NOT_FOUND => continue,
                Err(e) => return Err(e),
            };
            let sink = Sink::Stream(context.sink().clone());
            self.subscriptions.add(uri, owner.clone(), source, sink)?;
        }
        context.cancelled().await;
        Ok(())
    }

    /// How many resource subscriptions are active (both protocol generations), for tests and
    /// diagnostics.
    pub fn subscription_count(&self) -> usize {
        self.subscriptions.len()
    }
}
