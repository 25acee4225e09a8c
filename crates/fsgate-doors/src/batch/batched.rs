//! What a door does with the requests it batches.

use fsgate_base::error::GatewayError;
use fsgate_gateway::{Batch, Gateway};

/// What a door does with the requests it batches.
pub(crate) trait Batched: Send + Sync + 'static {
    /// One request, as the door hands it over.
    type Job: Send + 'static;
    /// One request run, its answer not yet handed over.
    type Done;

    /// The gateway the requests go through.
    fn gateway(&self) -> &Gateway;

    /// Runs one request, serving its operation in `batch` (a door's with
    /// [`crate::door::serve`]); None if it is no longer wanted (cancelled by the client).
    fn run(&self, job: Self::Job, batch: &Batch) -> Option<Self::Done>;

    /// Hands the answers over. `settled`: whether their deferred records are durable; if
    /// not, each answer must be replaced by this error.
    fn answer(&self, done: Vec<Self::Done>, settled: Result<(), GatewayError>);
}
