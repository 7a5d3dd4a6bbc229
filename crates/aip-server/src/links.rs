//! Typed links of the native HTTP binding (`ActionStatus.links`, `SessionView.links`): the
//! runtime's views are transport-neutral, and every binding of this server adds the `/aip/v1`
//! paths where the same objects can be read over HTTP, so answers are equal on every transport.

use aip_core::{ActionStatus, ApprovalRecordView, MessageBody, SessionView};

/// Adds links to every view inside `body`.
pub fn add(body: &mut MessageBody) {
    match body {
        MessageBody::ActionStatus(status) => action(status),
        MessageBody::ActionList(list) => list.actions.iter_mut().for_each(action),
        MessageBody::SessionView(view) => session(view),
        MessageBody::SessionList(list) => list.sessions.iter_mut().for_each(session),
        MessageBody::SessionResume(resume) => session(&mut resume.session),
        MessageBody::ApprovalRecordView(view) => approval(view),
        MessageBody::ApprovalList(list) => list.approvals.iter_mut().for_each(approval),
        _ => {}
    }
}

/// Links of an action's status.
pub fn action(status: &mut ActionStatus) {
    let id = status.action_id.as_str();
    status
        .links
        .insert("self".into(), format!("/aip/v1/actions/{id}"));
    status
        .links
        .insert("events".into(), format!("/aip/v1/actions/{id}/events"));
    status
        .links
        .insert("receipts".into(), format!("/aip/v1/receipts/{id}"));
}

/// Links of a session's view.
pub fn session(view: &mut SessionView) {
    let id = view.session_id.as_str();
    view.links
        .insert("self".into(), format!("/aip/v1/sessions/{id}"));
    view.links
        .insert("actions".into(), format!("/aip/v1/actions?session_id={id}"));
}

/// Links inside an approval's view: its governed action's status, when included (the view itself
/// has no links member).
pub fn approval(view: &mut ApprovalRecordView) {
    if let Some(status) = view.action_status.as_mut() {
        action(status);
    }
}
