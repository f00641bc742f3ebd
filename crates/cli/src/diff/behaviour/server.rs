//! The `[server]` settings that decide who may act and who confirms: tokens and their scopes,
//! `confirm_by`, how long a confirmation stays valid, and the lease of a shared journal.

use super::{Class, Shift, num};
use closedloop_plant::{Plant, Token, TokenScope};

const PLACE: &str = "(server)";

/// Every difference in who may act and who confirms.
pub(super) fn compare(old: &Plant, new: &Plant) -> Vec<Shift> {
    let (a, b) = (&old.server, &new.server);
    let mut out = tokens(&a.tokens, &b.tokens);
    if a.confirm_by != b.confirm_by {
        let within = |x: &[String], y: &[String]| x.iter().all(|n| y.contains(n));
        let (ca, cb) = (&a.confirm_by, &b.confirm_by);
        let class = match (ca.is_empty(), cb.is_empty()) {
            (true, false) => Class::Stricter,
            (false, true) => Class::Looser,
            // More names may confirm: looser; fewer: stricter.
            _ if within(ca, cb) => Class::Looser,
            _ if within(cb, ca) => Class::Stricter,
            _ => Class::Changed,
        };
        let meaning = if b.confirm_by.is_empty() {
            "the caller that asked confirms its own request (after asking its user)".to_string()
        } else {
            format!(
                "only {} confirm, never the token that asked",
                b.confirm_by.join(", ")
            )
        };
        let words = (format!("{:?}", a.confirm_by), format!("{:?}", b.confirm_by));
        out.push(Shift::new(PLACE, "confirm_by", words, meaning, class));
    }
    if a.confirm_ttl_s != b.confirm_ttl_s {
        let words = (
            format!("{} s", num(a.confirm_ttl_s)),
            format!("{} s", num(b.confirm_ttl_s)),
        );
        let meaning = format!("a confirmation stays valid {} s", num(b.confirm_ttl_s));
        out.push(Shift::new(
            PLACE,
            "confirm_ttl_s",
            words,
            meaning,
            Class::wider(b.confirm_ttl_s > a.confirm_ttl_s),
        ));
    }
    if a.journal != b.journal {
        let words = (
            closedloop_journal::shown_url(&a.journal),
            closedloop_journal::shown_url(&b.journal),
        );
        let meaning = "commands are journaled elsewhere: the old journal's idempotency keys, rate-limit history and unfinished commands are not seen";
        out.push(Shift::new(PLACE, "journal", words, meaning, Class::Changed));
    }
    if a.lease_s != b.lease_s {
        let words = (
            format!("{} s", num(a.lease_s)),
            format!("{} s", num(b.lease_s)),
        );
        let meaning = format!(
            "a dead gateway's devices move to another after {} s",
            num(b.lease_s)
        );
        out.push(Shift::new(PLACE, "lease_s", words, meaning, Class::Changed));
    }
    out
}

fn scope_words(scopes: &[TokenScope]) -> String {
    let each: Vec<String> = scopes
        .iter()
        .map(|s| match s {
            TokenScope::Read => "read".to_string(),
            TokenScope::Actuate(d) => format!("actuate:{d}"),
            TokenScope::ActuateAll => "actuate:*".to_string(),
            TokenScope::Admin => "admin".to_string(),
        })
        .collect();
    each.join(" ")
}

/// Whether every scope of `a` is granted by `b`. Any scope lets its holder read.
fn covered(a: &[TokenScope], b: &[TokenScope]) -> bool {
    a.iter().all(|s| {
        b.contains(s)
            || b.contains(&TokenScope::Admin)
            || matches!(s, TokenScope::Actuate(_)) && b.contains(&TokenScope::ActuateAll)
            || *s == TokenScope::Read && !b.is_empty()
    })
}

fn tokens(a: &[Token], b: &[Token]) -> Vec<Shift> {
    let mut out = Vec::new();
    for t in a {
        let key = format!("token {}", t.name);
        let Some(u) = b.iter().find(|u| u.name == t.name) else {
            let words = (scope_words(&t.scopes), "none".into());
            out.push(Shift::new(
                PLACE,
                key,
                words,
                "removed: its holder is refused",
                Class::Stricter,
            ));
            continue;
        };
        if t.sha256 != u.sha256 {
            out.push(Shift::new(
                PLACE,
                &key,
                ("secret".into(), "another secret".into()),
                "its secret was replaced: the old one is refused",
                Class::Changed,
            ));
        }
        if t.scopes != u.scopes {
            let (wider, narrower) = (covered(&t.scopes, &u.scopes), covered(&u.scopes, &t.scopes));
            let class = match (wider, narrower) {
                (true, false) => Class::Looser,
                (false, true) => Class::Stricter,
                _ => Class::Changed,
            };
            let meaning = format!("its holder may now {}", scope_words(&u.scopes));
            out.push(Shift::new(
                PLACE,
                key,
                (scope_words(&t.scopes), scope_words(&u.scopes)),
                meaning,
                class,
            ));
        }
    }
    for u in b.iter().filter(|u| a.iter().all(|t| t.name != u.name)) {
        let meaning = format!("added: its holder may {}", scope_words(&u.scopes));
        out.push(Shift::new(
            PLACE,
            format!("token {}", u.name),
            ("none".into(), scope_words(&u.scopes)),
            meaning,
            Class::Looser,
        ));
    }
    out
}
