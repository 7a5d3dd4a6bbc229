//! Receipt reads (spec 18.2): a chain shares its action's visibility.

use aip_core::{ReceiptChain, ReceiptQueryRequest};
use aip_store::Limit;

use crate::caller::Caller;
use crate::error::RuntimeError;
use crate::read::views;
use crate::runtime::Runtime;

impl Runtime {
    /// `receipt_query_request`: the chain named by `chain_id`, or the chain holding `receipt_id`;
    /// with both, the receipt must be in that chain.
    pub async fn read_receipts(
        &self,
        caller: &Caller,
        request: &ReceiptQueryRequest,
    ) -> Result<ReceiptChain, RuntimeError> {
        match (&request.chain_id, &request.receipt_id) {
            (Some(chain_id), None) => self.receipt_chain(caller, chain_id).await,
            (chain_id, Some(receipt_id)) => {
                let chain = self
                    .receipt_chain_by_receipt(caller, receipt_id.as_str())
                    .await?;
                match chain_id {
                    Some(id) if *id != chain.chain_id => Err(RuntimeError::NotFound("receipt")),
                    _ => Ok(chain),
                }
            }
            (None, None) => Err(RuntimeError::InvalidQuery(
                "receipt_query_request needs chain_id or receipt_id",
            )),
        }
    }

    /// A receipt chain with its root hash.
    pub async fn receipt_chain(
        &self,
        caller: &Caller,
        chain_id: &str,
    ) -> Result<ReceiptChain, RuntimeError> {
        let records = self
            .store()
            .list_receipts(&caller.tenant, chain_id, Limit::max())
            .await?;
        match records.first() {
            Some(first)
                if caller.may_read(
                    &first.tenant,
                    first.principal.as_deref().unwrap_or_default(),
                ) =>
            {
                views::chain(chain_id, &records)
            }
            Some(_) => Err(RuntimeError::NotFound("receipt chain")),
            // Purged by retention: a reader who could read it learns where it went.
            None => match self
                .store()
                .chain_tombstone(&caller.tenant, chain_id)
                .await?
            {
                Some(t)
                    if caller.may_read(&t.tenant, t.principal.as_deref().unwrap_or_default()) =>
                {
                    Err(RuntimeError::Purged {
                        what: "receipt chain",
                        archive: t.archive,
                    })
                }
                _ => Err(RuntimeError::NotFound("receipt chain")),
            },
        }
    }

    /// The chain that holds one receipt.
    pub async fn receipt_chain_by_receipt(
        &self,
        caller: &Caller,
        receipt_id: &str,
    ) -> Result<ReceiptChain, RuntimeError> {
        let record = self
            .store()
            .get_receipt(&caller.tenant, receipt_id)
            .await?
            .ok_or(RuntimeError::NotFound("receipt"))?;
        if !caller.may_read(
            &record.tenant,
            record.principal.as_deref().unwrap_or_default(),
        ) {
            return Err(RuntimeError::NotFound("receipt"));
        }
        self.receipt_chain(caller, &record.chain_id).await
    }
}
