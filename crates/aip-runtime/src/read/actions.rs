//! Action reads (spec 16.5): status, final result, lists with every filter of the wire request.

use aip_core::DataSensitivity;
use aip_core::{
    ActionList, ActionListRequest, ActionResult, ActionResultRequest, ActionStatus,
    ActionStatusRequest,
};
use aip_store::{ActionQuery, ActionRecord, Limit};

use crate::action::result;
use crate::caller::Caller;
use crate::error::RuntimeError;
use crate::read::views;
use crate::runtime::Runtime;

impl Runtime {
    /// `action_status_request`: the action's status (spec 16.5), after waiting up to `wait_ms` for
    /// a terminal state, with the result, receipt chain and first chunks when asked.
    pub async fn read_action_status(
        &self,
        caller: &Caller,
        request: &ActionStatusRequest,
    ) -> Result<ActionStatus, RuntimeError> {
        self.check_tenant(caller, request.tenant_id.as_deref())?;
        let action_id = request.action_id.as_str();
        let mut status = self
            .action_status(
                caller,
                action_id,
                request.include_result,
                request.include_receipts,
                request.wait_ms,
            )
            .await?;
        if request.include_chunks {
            status.chunks = self.first_chunks(caller, action_id, None).await?;
        }
        Ok(status)
    }

    /// An action's status, optionally waiting up to `wait_ms` for a terminal state.
    pub async fn action_status(
        &self,
        caller: &Caller,
        action_id: &str,
        include_result: bool,
        include_receipts: bool,
        wait_ms: Option<u64>,
    ) -> Result<ActionStatus, RuntimeError> {
        let wait = self.check_wait(wait_ms)?;
        let mut record = self.visible_action(caller, action_id).await?;
        if wait > 0 {
            record = self.wait_terminal(caller, record, wait).await?;
        }
        let chain = if include_receipts {
            Some(self.action_chain(&record).await?)
        } else {
            None
        };
        let withheld = self.withheld_output(caller, &record);
        status_with(&record, include_result, chain, withheld)
    }

    /// `action_result_request`: the final result; `NotFound` while there is none yet (after the
    /// bounded wait). The result always carries its receipt reference; terminal event hints are not
    /// available in this runtime (read the action's events).
    pub async fn read_action_result(
        &self,
        caller: &Caller,
        request: &ActionResultRequest,
    ) -> Result<ActionResult, RuntimeError> {
        self.check_tenant(caller, request.tenant_id.as_deref())?;
        self.action_result(caller, request.action_id.as_str(), request.wait_ms)
            .await
    }

    /// The final result of `action_id`; `NotFound` while there is none yet (after an optional
    /// bounded wait).
    pub async fn action_result(
        &self,
        caller: &Caller,
        action_id: &str,
        wait_ms: Option<u64>,
    ) -> Result<ActionResult, RuntimeError> {
        let wait = self.check_wait(wait_ms)?;
        let mut record = self.visible_action(caller, action_id).await?;
        if wait > 0 {
            record = self.wait_terminal(caller, record, wait).await?;
        }
        if !record.state.is_terminal() {
            return Err(RuntimeError::NotFound("final result"));
        }
        let result = result::stored(&record)?.ok_or(RuntimeError::NotFound("final result"))?;
        Ok(match self.withheld_output(caller, &record) {
            Some(_) => withhold(result),
            None => result,
        })
    }

    /// The sensitivity for which `caller` may not read `record`'s output (spec 9.6, 16.3):
    /// `restricted`, `regulated` or `unknown` data of another principal's action, without
    /// `data:sensitive`. A capability no longer admitted is of unknown sensitivity.
    pub(crate) fn withheld_output(
        &self,
        caller: &Caller,
        record: &ActionRecord,
    ) -> Option<DataSensitivity> {
        if record.principal == caller.id || caller.reads_sensitive_data() {
            return None;
        }
        let sensitivity = self
            .registry()
            .get(&record.capability)
            .and_then(|c| c.capability.contract.as_ref())
            .map_or(DataSensitivity::Unknown, |c| c.data.sensitivity);
        matches!(
            sensitivity,
            DataSensitivity::Restricted | DataSensitivity::Regulated | DataSensitivity::Unknown
        )
        .then_some(sensitivity)
    }

    /// `action_list_request`: the actions `caller` may read that match every filter (spec 16.3-16.4).
    /// A filter never widens visibility: naming a principal the caller may not read, or an approval
    /// (approvals are read by their own messages), matches nothing; a transaction filter lists the
    /// transaction's actions the caller may read.
    pub async fn read_action_list(
        &self,
        caller: &Caller,
        request: &ActionListRequest,
    ) -> Result<ActionList, RuntimeError> {
        self.check_tenant(caller, request.tenant_id.as_deref())?;
        let limit = self.limit(request.limit)?;
        let Ok(principal) =
            self.reader_bound(caller, request.principal_id.as_ref().map(|p| p.as_str()))
        else {
            return Ok(empty_list());
        };
        if request.approval_id.is_some() {
            return Ok(empty_list());
        }
        let state = request.state.map(crate::read::views::stored_state);
        let query = ActionQuery {
            tenant: caller.tenant.clone(),
            principal,
            session_id: request.session_id.as_ref().map(|s| s.as_str().to_owned()),
            state,
            capability: request
                .capability_id
                .as_ref()
                .map(|c| c.as_str().to_owned()),
            transaction_id: request
                .transaction_id
                .as_ref()
                .map(|t| t.as_str().to_owned()),
        };
        let page = self
            .store()
            .list_actions(&query, request.cursor.as_deref(), limit)
            .await?;
        let mut actions = Vec::with_capacity(page.items.len());
        for record in &page.items {
            let chain = if request.include_receipts {
                Some(self.action_chain(record).await?)
            } else {
                None
            };
            let withheld = self.withheld_output(caller, record);
            actions.push(status_with(
                record,
                request.include_results,
                chain,
                withheld,
            )?);
        }
        // `total_size` counts only what this page shows: hidden objects are never counted (16.3).
        Ok(ActionList {
            total_size: actions.len() as u64,
            actions,
            cursor: Some(page.next_cursor),
        })
    }

    /// An action's receipt chain, or where retention put it: a purged chain is never shown as an
    /// empty one, which would read as an action without evidence (spec 18.2, 18.6).
    async fn action_chain(&self, record: &ActionRecord) -> Result<ChainView, RuntimeError> {
        let chain = self.chain_of(&record.tenant, &record.action_id).await?;
        if chain.receipts.is_empty()
            && let Some(tombstone) = self
                .store()
                .chain_tombstone(&record.tenant, &record.action_id)
                .await?
        {
            return Ok(ChainView::Purged {
                archive: tombstone.archive,
            });
        }
        Ok(ChainView::Kept(chain))
    }

    pub(crate) async fn chain_of(
        &self,
        tenant: &str,
        chain_id: &str,
    ) -> Result<aip_core::ReceiptChain, RuntimeError> {
        views::chain(
            chain_id,
            &self
                .store()
                .list_receipts(tenant, chain_id, Limit::max())
                .await?,
        )
    }
}

/// An action's receipt chain as a view that asked for it sees it.
enum ChainView {
    /// The chain as stored.
    Kept(aip_core::ReceiptChain),
    /// Purged by retention; `archive` names the file holding it, when one was written.
    Purged { archive: Option<String> },
}

/// Link keys that say an action's receipt chain was purged (the receipts route answers
/// `aip.read.purged`, 410, for it) and which archive holds it.
pub(crate) const LINK_RECEIPTS_PURGED: &str = "receipt_chain_purged";
/// See [`LINK_RECEIPTS_PURGED`].
pub(crate) const LINK_RECEIPT_ARCHIVE: &str = "receipt_archive";

/// Link key naming the sensitivity for which a status view's result output was withheld.
pub(crate) const LINK_RESULT_WITHHELD: &str = "result_withheld";

/// `result` without what it carries of the action's data (its output, message and memory update):
/// the status, usage, receipt and error stay.
pub(crate) fn withhold(mut result: ActionResult) -> ActionResult {
    result.output = None;
    result.message = Vec::new();
    result.memory_update = None;
    result
}

/// The status view of `record`; a purged chain becomes links saying so, in place of the chain (the
/// view's schema has no other field for it), and a withheld output is withheld from its result.
fn status_with(
    record: &ActionRecord,
    include_result: bool,
    chain: Option<ChainView>,
    withheld: Option<DataSensitivity>,
) -> Result<ActionStatus, RuntimeError> {
    let mut status = chain_status(record, include_result, chain)?;
    if let Some(sensitivity) = withheld {
        status.result = status.result.map(withhold);
        status.links.insert(
            LINK_RESULT_WITHHELD.to_owned(),
            sensitivity.as_str().to_owned(),
        );
    }
    Ok(status)
}

fn chain_status(
    record: &ActionRecord,
    include_result: bool,
    chain: Option<ChainView>,
) -> Result<ActionStatus, RuntimeError> {
    match chain {
        Some(ChainView::Purged { archive }) => {
            let mut status = views::status(record, include_result, None)?;
            status.links.insert(
                LINK_RECEIPTS_PURGED.to_owned(),
                aip_core::ErrorCode::Purged.as_str().to_owned(),
            );
            if let Some(archive) = archive {
                status
                    .links
                    .insert(LINK_RECEIPT_ARCHIVE.to_owned(), archive);
            }
            Ok(status)
        }
        Some(ChainView::Kept(chain)) => views::status(record, include_result, Some(chain)),
        None => views::status(record, include_result, None),
    }
}

fn empty_list() -> ActionList {
    ActionList {
        total_size: 0,
        actions: Vec::new(),
        cursor: None,
    }
}
