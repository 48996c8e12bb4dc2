//! `shortlink_redis_cluster`: the directive shim (seeds resolved once, at config time).

use std::ffi::{c_char, c_void};

use nginx_sys::{ngx_command_t, ngx_conf_t};

use super::parse::{self, ArgError};
use super::shim::{duplicate, resolve, shim};
use super::{MainConf, RedisCluster};

pub extern "C" fn set_redis_cluster(
    cf: *mut ngx_conf_t,
    cmd: *mut ngx_command_t,
    conf: *mut c_void,
) -> *mut c_char {
    shim(cf, cmd, conf, |cf, mcf: &mut MainConf, args| {
        duplicate(&mcf.cluster)?;
        if mcf.redis.is_some() {
            return Err(ArgError("is exclusive with \"shortlink_redis\"".into()));
        }
        let args = parse::redis_cluster(args)?;
        let seeds = args
            .seeds
            .iter()
            .map(|seed| resolve(cf, seed))
            .collect::<Result<_, _>>()?;
        mcf.cluster = Some(RedisCluster {
            spec: args.spec,
            seeds,
            read_replicas: args.read_replicas,
        });
        Ok(())
    })
}
