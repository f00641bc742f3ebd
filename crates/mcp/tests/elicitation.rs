//! Confirmation asked in protocol: a client that declares elicitation is shown the form, and
//! only an accepted, confirmed answer moves the slide.

mod common;

use closedloop_sim::SimDevice;
use common::slide::{plant, sc};
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::json;
use std::collections::BTreeMap;

/// A client whose user answers the in-protocol confirmation form.
#[derive(Clone)]
struct Asker {
    answer: rmcp::model::ElicitationAction,
    confirm: bool,
}

impl rmcp::ClientHandler for Asker {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        rmcp::model::ClientConfig::new(
            rmcp::model::ClientCapabilities::builder()
                .enable_elicitation()
                .build(),
            rmcp::model::Implementation::new("asker", "0.0.1"),
        )
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _cx: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        let rmcp::model::ElicitRequestParams::FormElicitationParams { message, .. } = request
        else {
            return Ok(rmcp::model::ElicitResult::new(
                rmcp::model::ElicitationAction::Decline,
            ));
        };
        assert!(
            message.contains("slide move_to") && message.contains("target_mm"),
            "{message}"
        );
        Ok(rmcp::model::ElicitResult::new(self.answer.clone())
            .with_content(json!({"confirm": self.confirm})))
    }
}

async fn start_asker(
    asker: Asker,
) -> (
    RunningService<RoleClient, Asker>,
    BTreeMap<String, SimDevice>,
) {
    let src = plant("");
    let (engine, sims) = common::engine(&src, std::path::Path::new(".")).await;
    let io = common::pipe(closedloop_mcp::Server::new(engine, "tester"));
    (asker.serve(io).await.unwrap(), sims)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_with_elicitation_are_asked_in_protocol() {
    use rmcp::model::ElicitationAction;
    let (c, sims) = start_asker(Asker {
        answer: ElicitationAction::Accept,
        confirm: true,
    })
    .await;
    let p = CallToolRequestParams::new("slide_move_to").with_arguments(
        json!({"target_mm": 40.0, "wait_s": 5})
            .as_object()
            .cloned()
            .unwrap(),
    );
    let r = c.call_tool(p).await.unwrap();
    assert_eq!(sc(&r)["status"], "completed", "{:?}", r.structured_content);
    assert!((sims["slide"].peek().position_mm.unwrap() - 40.0).abs() < 0.5);
    c.cancel().await.unwrap();

    for (answer, confirm) in [
        (ElicitationAction::Decline, false),
        (ElicitationAction::Accept, false),
        (ElicitationAction::Cancel, false),
    ] {
        let (c, sims) = start_asker(Asker { answer, confirm }).await;
        let p = CallToolRequestParams::new("slide_move_to")
            .with_arguments(json!({"target_mm": 40.0}).as_object().cloned().unwrap());
        let r = c.call_tool(p).await.unwrap();
        assert_eq!(
            (r.is_error, sc(&r)["error_code"].as_str()),
            (Some(true), Some("INTERLOCK")),
            "{:?}",
            r.structured_content
        );
        assert_eq!(sims["slide"].peek().target_mm, Some(0.0), "nothing moved");
        c.cancel().await.unwrap();
    }
}
