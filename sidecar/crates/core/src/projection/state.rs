//! What the metrics read of the pipeline: whether the projection is whole (the marker, or on a
//! cluster every slot's marker), the visit stream's length and the consumer group's lag (on a
//! cluster, summed over the 16 streams).

use super::{missing_marker_slots, Projection, ProjectionError};
use shortlink_wire::cluster::event_stream_keys;
use shortlink_wire::keys::PROJECTION_MARKER;

impl Projection {
    /// For metrics: whether the projection marker is there, the visit stream's length, and the
    /// consumer group's lag (entries not yet delivered; `None` before the group exists or when
    /// Redis cannot tell).
    pub async fn pipeline_state(
        &self,
        stream: &str,
        group: &str,
    ) -> Result<PipelineState, ProjectionError> {
        if self.primary.is_cluster() {
            return self.cluster_pipeline_state(group).await;
        }
        let mut pipe = redis::pipe();
        pipe.cmd("EXISTS")
            .arg(PROJECTION_MARKER)
            .cmd("XLEN")
            .arg(stream);
        let (marker, stream_length): (bool, u64) = self.run(&pipe, self.timeout).await?;
        let mut pipe = redis::pipe();
        pipe.cmd("XINFO").arg("GROUPS").arg(stream);
        let lag = match self.run::<(Vec<redis::Value>,)>(&pipe, self.timeout).await {
            Ok((groups,)) => groups.iter().find_map(|g| group_lag(g, group)),
            Err(_) => None,
        };
        Ok(PipelineState {
            marker,
            stream_length,
            lag,
        })
    }

    /// [`Self::pipeline_state`] on a cluster: every slot's marker there, and the 16 visit
    /// streams' lengths and lags summed (a lag Redis cannot tell makes the sum unknown).
    pub(super) async fn cluster_pipeline_state(
        &self,
        group: &str,
    ) -> Result<PipelineState, ProjectionError> {
        let (_, mut connection) = self.connection().await?;
        let allowance = self.timeout * 4;
        let marker = tokio::time::timeout(allowance, missing_marker_slots(&mut connection))
            .await
            .map_err(|_| ProjectionError::Timeout(allowance))??
            .is_empty();
        let mut state = PipelineState {
            marker,
            stream_length: 0,
            lag: Some(0),
        };
        for stream in event_stream_keys() {
            let mut pipe = redis::pipe();
            pipe.cmd("XLEN").arg(&stream);
            let (length,): (u64,) = self.run(&pipe, self.timeout).await?;
            state.stream_length += length;
            let mut pipe = redis::pipe();
            pipe.cmd("XINFO").arg("GROUPS").arg(&stream);
            let lag = match self.run::<(Vec<redis::Value>,)>(&pipe, self.timeout).await {
                Ok((groups,)) => groups.iter().find_map(|g| group_lag(g, group)),
                Err(_) => None,
            };
            state.lag = state.lag.zip(lag).map(|(sum, lag)| sum + lag);
        }
        Ok(state)
    }
}

/// What [`Projection::pipeline_state`] read.
#[derive(Debug, Clone, Copy)]
pub struct PipelineState {
    pub marker: bool,
    pub stream_length: u64,
    pub lag: Option<u64>,
}

/// The `lag` of `group` in one entry of `XINFO GROUPS` (a map, or a flat list under RESP2).
fn group_lag(entry: &redis::Value, group: &str) -> Option<u64> {
    let pairs: Vec<(&redis::Value, &redis::Value)> = match entry {
        redis::Value::Map(pairs) => pairs.iter().map(|(k, v)| (k, v)).collect(),
        redis::Value::Array(items) => items
            .chunks(2)
            .filter_map(|c| Some((c.first()?, c.get(1)?)))
            .collect(),
        _ => return None,
    };
    let text = |v: &redis::Value| redis::from_redis_value::<String>(v).ok();
    let field = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| text(k).as_deref() == Some(name))
            .map(|(_, v)| *v)
    };
    if text(field("name")?)?.as_str() != group {
        return None;
    }
    redis::from_redis_value::<u64>(field("lag")?).ok()
}
