//! Action reads (spec 16.5): status, final result, lists with every filter of the wire request.

use aip_core::{
    ActionList, ActionListRequest, ActionResult, ActionResultRequest, ActionStatus,
    ActionStatusRequest,
};
use aip_store::{ActionQuery, ActionState, Limit};

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
            Some(self.chain_of(&record.tenant, &record.action_id).await?)
        } else {
            None
        };
        views::status(&record, include_result, chain)
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
        result::stored(&record)?.ok_or(RuntimeError::NotFound("final result"))
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
        let state = match request.state {
            Some(s) => Some(
                ActionState::parse(s.as_str())
                    .ok_or(RuntimeError::InvalidQuery("unknown action state"))?,
            ),
            None => None,
        };
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
                Some(self.chain_of(&record.tenant, &record.action_id).await?)
            } else {
                None
            };
            actions.push(views::status(record, request.include_results, chain)?);
        }
        // `total_size` counts only what this page shows: hidden objects are never counted (16.3).
        Ok(ActionList {
            total_size: actions.len() as u64,
            actions,
            cursor: Some(page.next_cursor),
        })
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

fn empty_list() -> ActionList {
    ActionList {
        total_size: 0,
        actions: Vec::new(),
        cursor: None,
    }
}
