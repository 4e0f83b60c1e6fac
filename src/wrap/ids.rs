//! The ids the server sees. The wrapper sends requests of its own (a replayed `initialize`,
//! the lists fetched again after a restart, the pings that free a held request), all with
//! string ids under [`OWN_ID_PREFIX`]. A client's id is relayed as it came unless it is a
//! string under that prefix too: the server then sees it under [`CLIENT_PREFIX`], and its
//! answer goes back to the client under the client's own id. So the server's answers fall
//! into two namespaces that cannot overlap, whatever ids the client picks, and wrappers
//! nested in one another each see only their own requests as their own.

use std::borrow::Cow;

use crate::json_read;
use crate::message::RequestId;

/// Every id of a request the wrapper itself sends the server starts with this; no client's id
/// reaches the server starting with it except under [`CLIENT_PREFIX`].
pub(super) const OWN_ID_PREFIX: &str = "mcpipe-wrap-";

/// The id prefix of the `initialize` the wrapper replays to a restarted server.
pub(super) const REPLAY_PREFIX: &str = "mcpipe-wrap-replay-";

/// The id prefix of the list requests the wrapper sends a restarted server, to compare its
/// lists with what the client saw.
pub(super) const RELIST_PREFIX: &str = "mcpipe-wrap-relist-";

/// The id prefix of the pings the wrapper sends to free a request a server holds in its
/// buffer (see [`super::pacing`]).
pub(super) const NUDGE_PREFIX: &str = "mcpipe-wrap-nudge-";

/// What a client's id under [`OWN_ID_PREFIX`] becomes on its way to the server: this, then
/// the client's id. No id of the wrapper's own starts with it.
pub(super) const CLIENT_PREFIX: &str = "mcpipe-wrap-client-";

/// Whether `id` is in the wrapper's namespace (a string under [`OWN_ID_PREFIX`]): a client's
/// such id is renamed for the server, and a server's answer with one is not to a client's id
/// as it came. Every other id is relayed as it came: one test of a string's first bytes.
#[inline]
pub(super) fn is_reserved(id: &RequestId) -> bool {
    id.as_str().is_some_and(|s| s.starts_with(OWN_ID_PREFIX))
}

/// The id the server sees for the client's `id` that [`is_reserved`].
pub(super) fn renamed(id: &RequestId) -> RequestId {
    RequestId::from(format!(
        "{CLIENT_PREFIX}{}",
        id.as_str().unwrap_or_default()
    ))
}

/// The id the server sees for the client's `id`: itself, or its new name.
pub(super) fn sent(id: &RequestId) -> Cow<'_, RequestId> {
    if is_reserved(id) {
        Cow::Owned(renamed(id))
    } else {
        Cow::Borrowed(id)
    }
}

/// For the id of an answer from the server that [`is_reserved`]: the client's id it renamed,
/// or `None` when it is one of the wrapper's own.
pub(super) fn client_id(id: &RequestId) -> Option<RequestId> {
    id.as_str()?
        .strip_prefix(CLIENT_PREFIX)
        .map(RequestId::from)
}

/// The client's request line with every `id` member's value replaced by `id`, the rest
/// byte for byte as it came; `None` where its members cannot be read without building them
/// (the loop then built the whole message, params included, and it is written anew).
pub(super) fn with_id(line: &[u8], id: &RequestId) -> Option<Vec<u8>> {
    let members = json_read::top_level_spans(line)?;
    let mut out = Vec::with_capacity(line.len() + CLIENT_PREFIX.len() + 1);
    let (mut copied, mut found) = (0, false);
    for member in members.iter().filter(|m| m.name == "id") {
        // The value is a slice of `line` (the reader does not copy): where it starts there.
        let start = (member.value.as_ptr() as usize).checked_sub(line.as_ptr() as usize)?;
        let end = start + member.value.len();
        if start < copied || line.get(start..end)? != member.value.as_bytes() {
            return None;
        }
        out.extend_from_slice(&line[copied..start]);
        id.write_json(&mut out);
        copied = end;
        found = true;
    }
    if !found {
        return None;
    }
    out.extend_from_slice(&line[copied..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_string_id_under_the_wrappers_prefix_is_renamed_and_it_comes_back_as_it_went() {
        for id in [
            RequestId::from(7),
            RequestId::from("x"),
            RequestId::from("mcpipe-wrap"),
            RequestId::from(""),
        ] {
            assert!(!is_reserved(&id), "{id}");
            assert_eq!(sent(&id), Cow::Borrowed(&id));
        }
        for tag in [
            "mcpipe-wrap-",
            "mcpipe-wrap-replay-2",
            "mcpipe-wrap-relist-tools/list",
            "mcpipe-wrap-nudge-1",
            "mcpipe-wrap-client-x",
            "mcpipe-wrap-client-mcpipe-wrap-replay-2",
        ] {
            let id = RequestId::from(tag);
            assert!(is_reserved(&id), "{tag}");
            let sent = sent(&id);
            assert!(is_reserved(&sent), "{tag}");
            assert_eq!(client_id(&sent), Some(id.clone()), "{tag}");
        }
        for own in [
            "mcpipe-wrap-replay-2",
            "mcpipe-wrap-nudge-1",
            "mcpipe-wrap-",
        ] {
            assert_eq!(
                client_id(&RequestId::from(own)),
                None,
                "the wrapper's: {own}"
            );
        }
    }

    #[test]
    fn a_renamed_id_is_spliced_into_the_line_as_it_came() {
        let id = RequestId::from("mcpipe-wrap-client-a\"b");
        let line = br#"{ "id" : "mcpipe-wrap-nudge-1", "method":"ping","params":{"id":1.50}}"#;
        let out = with_id(line, &id).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{ "id" : "mcpipe-wrap-client-a\"b", "method":"ping","params":{"id":1.50}}"#
        );
        // A duplicate id: both renamed, whichever one the server reads.
        let line = br#"{"id":"mcpipe-wrap-a","jsonrpc":"2.0","id":"mcpipe-wrap-b","method":"m"}"#;
        let out = String::from_utf8(with_id(line, &id).unwrap()).unwrap();
        assert_eq!(out.matches("mcpipe-wrap-client-a").count(), 2, "{out}");
        // Members the reader declines (an escaped name): the caller writes the message anew.
        assert!(with_id(br#"{"\u0069d":"mcpipe-wrap-a","method":"m"}"#, &id).is_none());
        assert!(with_id(br#"{"method":"m"}"#, &id).is_none());
    }
}
