//! Who the session logs in as: the user-token policy a user name and password are sent under,
//! and what a refused identity means for the session state.
//!
//! The anonymous token needs nothing from the server. A UserName token must name one of the
//! endpoint's user-token policies by its id, and that id is the server's own choice
//! (`username` for asyncua, `userpass_none` for async-opcua, others elsewhere; most servers
//! refuse a token under an id they do not offer). So before a UserName session is made, the
//! server is asked for its endpoints (GetEndpoints, which needs no session) and the policy is
//! taken from the endpoint with the configured security.

use std::time::Duration;

use opcua::client::{Client, IdentityToken};
use opcua::crypto::SecurityPolicy;
use opcua::types::{EndpointDescription, MessageSecurityMode, StatusCode, UserTokenType};

use crate::config::Identity;
use crate::error::status_name;

/// The statuses with which a server refuses the identity offered in ActivateSession.
const REFUSALS: [StatusCode; 3] = [
    StatusCode::BadUserAccessDenied,
    StatusCode::BadIdentityTokenInvalid,
    StatusCode::BadIdentityTokenRejected,
];

/// The async-opcua token for `identity` (the password leaves this crate only here).
pub(crate) fn token(identity: &Identity) -> IdentityToken {
    match identity {
        Identity::Anonymous => IdentityToken::Anonymous,
        Identity::UserName { user, password } => {
            IdentityToken::new_user_name(user.clone(), password.clone())
        }
    }
}

/// The session state's reason when a session could not be activated because the server
/// refused `identity` (`code` is one of [`REFUSALS`]); `None` for any other failure. The reason
/// names the status, the identity (never the password) and what to change, so a refused login
/// never reads like a dead server.
pub(crate) fn refused(code: StatusCode, identity: &Identity) -> Option<String> {
    // Info bits aside (they never change what was refused).
    if !REFUSALS
        .iter()
        .any(|r| r.bits() == code.bits() & 0xFFFF_0000)
    {
        return None;
    }
    let status = status_name(code);
    Some(match identity {
        Identity::Anonymous => format!(
            "{status}: the server refused the anonymous identity (it wants a user); add \
             username and password to the driver table"
        ),
        Identity::UserName { .. } => format!(
            "{status}: the server refused the identity {} (wrong user name or password, or \
             the user may not log in); check username and password in the driver table",
            identity.describe()
        ),
    })
}

/// Asks the server at `url` which UserName policy its endpoint with `policy` and `mode` takes,
/// waiting at most `bound`: that endpoint with only its UserName policy left. `Err` is the
/// session state's reason: the status the stack failed with (the caller adds the socket's
/// error), or the reason in words (no answer, no such endpoint, no user names on it).
pub(crate) async fn user_name_policy(
    client: &Client,
    url: &str,
    (policy, mode): (SecurityPolicy, MessageSecurityMode),
    bound: Duration,
) -> Result<EndpointDescription, (Option<StatusCode>, String)> {
    let endpoints =
        match tokio::time::timeout(bound, client.get_server_endpoints_from_url(url)).await {
            Ok(Ok(endpoints)) => endpoints,
            Ok(Err(e)) => return Err((Some(e.status()), status_name(e.status()))),
            Err(_) => {
                let why = format!("Bad_Timeout: no answer to GetEndpoints within {bound:?}");
                return Err((None, why));
            }
        };
    // The URL is not compared: a server may advertise another host name or port than the one
    // it is reached by (behind NAT, or listening on port 0).
    let Some(endpoint) = endpoints.into_iter().find(|e| {
        e.security_mode == mode
            && SecurityPolicy::from_uri(e.security_policy_uri.as_ref()) == policy
    }) else {
        return Err((
            None,
            format!(
                "the server offers no endpoint with security {} in mode {mode:?}",
                policy.to_str()
            ),
        ));
    };
    pick(endpoint, policy)
}

/// The endpoint reduced to its first UserName policy, or why it cannot carry a user name.
fn pick(
    mut endpoint: EndpointDescription,
    channel: SecurityPolicy,
) -> Result<EndpointDescription, (Option<StatusCode>, String)> {
    let offered = endpoint.user_identity_tokens.take().unwrap_or_default();
    let Some(user_name) = offered
        .iter()
        .find(|p| p.token_type == UserTokenType::UserName)
        .cloned()
    else {
        let kinds: Vec<String> = offered
            .iter()
            .map(|p| format!("{:?}", p.token_type))
            .collect();
        return Err((
            None,
            format!(
                "the server takes no user name and password on this endpoint (it offers: {}); \
                 remove username and password, or enable user logins on the server",
                if kinds.is_empty() {
                    "nothing".to_string()
                } else {
                    kinds.join(", ")
                }
            ),
        ));
    };
    // A policy that encrypts the password on an unsecured channel encrypts it to the server's
    // certificate; without one async-opcua could not encrypt it at all.
    let token_policy = user_name.security_policy_uri.as_ref();
    let encrypts =
        !token_policy.is_empty() && SecurityPolicy::from_uri(token_policy) != SecurityPolicy::None;
    if channel == SecurityPolicy::None && encrypts && endpoint.server_certificate.is_null() {
        return Err((
            None,
            "the server wants the password encrypted but presents no certificate to encrypt \
             it to"
                .to_string(),
        ));
    }
    endpoint.user_identity_tokens = Some(vec![user_name]);
    Ok(endpoint)
}

#[cfg(test)]
mod tests {
    use super::*;
    use opcua::types::{UAString, UserTokenPolicy};

    fn policy(id: &str, kind: UserTokenType) -> UserTokenPolicy {
        UserTokenPolicy {
            policy_id: UAString::from(id),
            token_type: kind,
            ..UserTokenPolicy::anonymous()
        }
    }

    fn endpoint(tokens: Vec<UserTokenPolicy>) -> EndpointDescription {
        let mut e: EndpointDescription = (
            "opc.tcp://h:4840",
            SecurityPolicy::None.to_uri(),
            MessageSecurityMode::None,
            tokens,
        )
            .into();
        e.user_identity_tokens.get_or_insert_with(Vec::new);
        e
    }

    #[test]
    fn the_server_s_own_user_name_policy_id_is_used() {
        let offered = endpoint(vec![
            UserTokenPolicy::anonymous(),
            policy("userpass_none", UserTokenType::UserName),
        ]);
        let picked = pick(offered, SecurityPolicy::None).expect("a user name policy");
        let tokens = picked.user_identity_tokens.expect("tokens");
        assert_eq!(tokens.len(), 1);
        assert_eq!(tokens[0].policy_id.as_ref(), "userpass_none");
    }

    #[test]
    fn an_endpoint_without_user_names_says_what_it_offers() {
        let offered = endpoint(vec![UserTokenPolicy::anonymous()]);
        let (_, why) = pick(offered, SecurityPolicy::None).unwrap_err();
        assert!(
            why.contains("no user name") && why.contains("Anonymous"),
            "{why}"
        );
    }

    #[test]
    fn refusals_name_the_user_and_never_the_password() {
        let alice = Identity::UserName {
            user: "alice".into(),
            password: "hunter2-secret".into(),
        };
        for code in REFUSALS {
            let why = refused(code, &alice).expect("a refusal");
            assert!(why.contains("alice") && why.contains("refused"), "{why}");
            assert!(!why.contains("hunter2-secret"), "{why}");
        }
        assert!(
            refused(StatusCode::BadUserAccessDenied, &alice)
                .unwrap()
                .starts_with("Bad_UserAccessDenied: ")
        );
        let anonymous = refused(StatusCode::BadIdentityTokenRejected, &Identity::Anonymous);
        assert!(anonymous.unwrap().contains("add username and password"));
        assert_eq!(refused(StatusCode::BadTimeout, &alice), None);
    }
}
