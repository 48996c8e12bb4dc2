//! The directive table. Most directives set one `Option` field of a conf struct once: they are
//! rows of [`value!`] (`slot.rs`, one generic setter as nginx's `ngx_conf_set_*_slot`), each with
//! its parser: the pure ones in `parse.rs`, the few that resolve a path, a variable or an
//! address at config time below. Four directives do more than store a value (install a content
//! handler, add to a list) and keep their own shims. Errors go through one reporting path.

use std::ffi::{c_char, c_void};
use std::path::Path;
use std::{fs, mem, ptr};

use nginx_sys::{
    ngx_command_t, ngx_conf_full_name, ngx_conf_t, ngx_http_compile_complex_value,
    ngx_http_compile_complex_value_t, ngx_http_complex_value_t, ngx_http_get_variable_index,
    ngx_pcalloc, ngx_str_t, ngx_uint_t, NGX_CONF_1MORE, NGX_CONF_FLAG, NGX_CONF_NOARGS,
    NGX_CONF_TAKE1, NGX_CONF_TAKE12, NGX_CONF_TAKE2, NGX_HTTP_LOC_CONF, NGX_HTTP_LOC_CONF_OFFSET,
    NGX_HTTP_MAIN_CONF, NGX_HTTP_MAIN_CONF_OFFSET, NGX_HTTP_SRV_CONF, NGX_OK,
};
use ngx::http::{
    HttpModuleLocationConf, HttpModuleMainConf, HttpModuleServerConf, NgxHttpCoreModule,
};
use ngx::ngx_string;

use super::parse::{self, ArgError};
use super::shim::{resolve, shim};
use super::slot::value;
use super::{AnswerPhase, Dynamic, LocConf, MainConf, PoolSource, Redis, WorkspaceSource};
use crate::geo::GeoDb;
use crate::request::host::PoolSet;
use crate::{handler, status, ShortlinkModule};
use shortlink_wire::network::{HostingList, HostingRanges};
use shortlink_wire::path::Route;

const MAIN: u32 = NGX_HTTP_MAIN_CONF;
const ANY: u32 = NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF;
const LOC: u32 = NGX_HTTP_LOC_CONF;

type SetFn = unsafe extern "C" fn(*mut ngx_conf_t, *mut ngx_command_t, *mut c_void) -> *mut c_char;

/// A row with its own shim: a directive that does more than store one value.
const fn command(name: ngx_str_t, type_: u32, set: SetFn, conf: usize) -> ngx_command_t {
    ngx_command_t {
        name,
        type_: type_ as ngx_uint_t,
        set: Some(set),
        conf,
        offset: 0,
        post: ptr::null_mut(),
    }
}

const M: usize = NGX_HTTP_MAIN_CONF_OFFSET;
const L: usize = NGX_HTTP_LOC_CONF_OFFSET;

// nginx keeps a mutable pointer to this table (the ABI wants `static mut`); Rust never writes it.
pub static mut COMMANDS: [ngx_command_t; 33] = [
    command(ngx_string!("shortlink"), LOC | NGX_CONF_FLAG, set_enable, L),
    command(
        ngx_string!("shortlink_status"),
        LOC | NGX_CONF_NOARGS,
        set_status,
        L,
    ),
    value!("shortlink_pool", ANY | NGX_CONF_TAKE1, LocConf.pool, pool),
    value!(
        "shortlink_workspace",
        ANY | NGX_CONF_TAKE1,
        LocConf.workspace,
        workspace
    ),
    value!(
        "shortlink_timeout",
        ANY | NGX_CONF_TAKE1,
        LocConf.timeout_ms,
        |_, a| parse::positive_time(a[0])
    ),
    // `off` (stored empty) undoes an inherited fallback.
    value!(
        "shortlink_fallback",
        ANY | NGX_CONF_TAKE1,
        LocConf.fallback,
        |_, a| {
            if a[0] == b"off" {
                Ok(Vec::new())
            } else {
                parse::fallback(a[0])
            }
        }
    ),
    value!(
        "shortlink_forward_query",
        ANY | NGX_CONF_FLAG,
        LocConf.forward_query,
        flag
    ),
    value!(
        "shortlink_cache_control",
        ANY | NGX_CONF_1MORE,
        LocConf.cache_control,
        |_, a| parse::cache_control(a)
    ),
    value!(
        "shortlink_redis",
        MAIN | NGX_CONF_1MORE,
        MainConf.redis,
        redis,
        check = |mcf| match mcf.cluster {
            Some(_) => Err(ArgError(
                "is exclusive with \"shortlink_redis_cluster\"".into()
            )),
            None => Ok(()),
        }
    ),
    value!(
        "shortlink_redis_cluster",
        MAIN | NGX_CONF_1MORE,
        MainConf.cluster,
        super::cluster::redis_cluster,
        check = |mcf| match mcf.redis {
            Some(_) => Err(ArgError("is exclusive with \"shortlink_redis\"".into())),
            None => Ok(()),
        }
    ),
    value!(
        "shortlink_cache",
        MAIN | NGX_CONF_1MORE,
        MainConf.cache,
        |_, a| parse::cache(a),
        post = |mcf, a| mcf.cache_ttl_set = a.iter().any(|a| a.starts_with(b"ttl="))
    ),
    value!(
        "shortlink_cache_zone",
        MAIN | NGX_CONF_TAKE2,
        MainConf.cache_zone,
        |_, a| parse::cache_zone(a)
    ),
    value!(
        "shortlink_cache_prefetch",
        MAIN | NGX_CONF_FLAG,
        MainConf.cache_prefetch,
        flag
    ),
    value!(
        "shortlink_code_secret_file",
        MAIN | NGX_CONF_TAKE1,
        MainConf.secret,
        secret_file
    ),
    value!(
        "shortlink_code_length",
        MAIN | NGX_CONF_TAKE1,
        MainConf.code_length,
        |_, a| parse::code_length(a[0])
    ),
    value!(
        "shortlink_code_check",
        MAIN | NGX_CONF_FLAG,
        MainConf.code_check,
        flag
    ),
    value!("shortlink_track", ANY | NGX_CONF_FLAG, LocConf.track, flag),
    value!(
        "shortlink_events_max_len",
        MAIN | NGX_CONF_TAKE1,
        MainConf.events_max_len,
        |_, a| parse::events_max_len(a[0])
    ),
    value!(
        "shortlink_events_buffer",
        MAIN | NGX_CONF_TAKE12,
        MainConf.events_buffer,
        |_, a| parse::events_buffer(a)
    ),
    value!(
        "shortlink_events_flush",
        MAIN | NGX_CONF_TAKE1,
        MainConf.events_flush_ms,
        |_, a| parse::events_flush(a[0])
    ),
    value!(
        "shortlink_orphans_per_second",
        MAIN | NGX_CONF_TAKE1,
        MainConf.orphans_per_second,
        |_, a| parse::orphans_per_second(a[0])
    ),
    value!(
        "shortlink_cache_invalidation",
        MAIN | NGX_CONF_FLAG,
        MainConf.cache_invalidation,
        flag
    ),
    value!(
        "shortlink_miss_fallback",
        ANY | NGX_CONF_FLAG,
        LocConf.miss_fallback,
        flag
    ),
    value!(
        "shortlink_status_domains",
        ANY | NGX_CONF_FLAG,
        LocConf.status_domains,
        flag
    ),
    value!(
        "shortlink_imported_codes",
        ANY | NGX_CONF_FLAG,
        LocConf.imported_codes,
        flag
    ),
    value!(
        "shortlink_code_case",
        ANY | NGX_CONF_TAKE1,
        LocConf.code_case,
        |_, a| parse::code_case(a[0])
    ),
    value!(
        "shortlink_trailing_slash",
        ANY | NGX_CONF_FLAG,
        LocConf.trailing_slash,
        flag
    ),
    value!(
        "shortlink_answer_phase",
        ANY | NGX_CONF_TAKE1,
        LocConf.answer_phase,
        answer_phase
    ),
    value!("shortlink_geo", MAIN | NGX_CONF_TAKE12, MainConf.geo, geo),
    value!(
        "shortlink_hosting_networks",
        MAIN | NGX_CONF_TAKE12,
        MainConf.networks,
        hosting_networks
    ),
    command(
        ngx_string!("shortlink_apple_app"),
        MAIN | NGX_CONF_1MORE,
        add_apple_app,
        M,
    ),
    command(
        ngx_string!("shortlink_android_app"),
        MAIN | NGX_CONF_1MORE,
        add_android_app,
        M,
    ),
    ngx_command_t::empty(),
];

/// `on`/`off`, the parser of every flag directive.
fn flag(_: &mut ngx_conf_t, args: &[&[u8]]) -> Result<bool, ArgError> {
    parse::flag(args[0])
}

/// `shortlink_pool`: a fixed list parsed once, a lone variable, or a complex value.
fn pool(cf: &mut ngx_conf_t, args: &[&[u8]]) -> Result<PoolSource, ArgError> {
    Ok(if !args[0].contains(&b'$') {
        PoolSource::Fixed(PoolSet::parse(args[0]))
    } else {
        PoolSource::Dynamic(dynamic(cf, args[0])?)
    })
}

/// `shortlink_workspace`: a fixed name checked once, a lone variable, or a complex value.
fn workspace(cf: &mut ngx_conf_t, args: &[&[u8]]) -> Result<WorkspaceSource, ArgError> {
    Ok(if !args[0].contains(&b'$') {
        WorkspaceSource::Fixed(parse::workspace(args[0])?)
    } else {
        WorkspaceSource::Dynamic(dynamic(cf, args[0])?)
    })
}

/// A value holding variables: a lone variable's index, or the compiled complex value.
fn dynamic(cf: &mut ngx_conf_t, arg: &[u8]) -> Result<Dynamic, ArgError> {
    Ok(match parse::lone_variable(arg) {
        Some(name) => Dynamic::Variable(variable_index(cf, name)?),
        None => Dynamic::Complex(compile_complex_value(cf)?),
    })
}

/// `shortlink_redis`: its settings, the address resolved once, at config time.
fn redis(cf: &mut ngx_conf_t, args: &[&[u8]]) -> Result<Redis, ArgError> {
    let spec = parse::redis(args)?;
    let peer = resolve(cf, &spec.address)?;
    Ok(Redis { spec, peer })
}

/// `shortlink_code_secret_file`: the key of the check character, read at config time.
fn secret_file(cf: &mut ngx_conf_t, _: &[&[u8]]) -> Result<Vec<u8>, ArgError> {
    let path = full_path(cf)?;
    let text =
        fs::read_to_string(&path).map_err(|e| ArgError(format!("cannot read \"{path}\": {e}")))?;
    shortcode::parse_hex_secret(&text)
        .map_err(|e| ArgError(format!("in \"{path}\": {e} (hex digits expected)")))
}

/// `shortlink_answer_phase`; `rewrite` anywhere adds the rewrite-phase handler.
fn answer_phase(cf: &mut ngx_conf_t, args: &[&[u8]]) -> Result<AnswerPhase, ArgError> {
    let phase = parse::answer_phase(args[0])?;
    if phase == AnswerPhase::Rewrite {
        ShortlinkModule::main_conf_mut(cf)
            .ok_or_else(|| ArgError("has no http configuration".into()))?
            .rewrite_phase = true;
    }
    Ok(phase)
}

/// `shortlink_geo`: the country database (IPv4, and optionally a separate IPv6 one).
fn geo(cf: &mut ngx_conf_t, args: &[&[u8]]) -> Result<GeoDb, ArgError> {
    let path = full_path(cf)?;
    let ipv6 = match args.get(1) {
        Some(_) => Some(full_path_of(cf, 2)?),
        None => None,
    };
    GeoDb::open(&path, ipv6.as_deref()).map_err(ArgError)
}

/// `shortlink_hosting_networks <asn dir> [<file>]`: the ASN table (`scripts/fetch-geo`'s
/// `DIR/asn`, the sidecar's `--geoip-asn-dir`) and the operator's additions to the shipped list
/// (the sidecar's `--hosting-networks` file), resolved here once into the ranges they cover. A
/// missing or damaged table or a bad line of the file fails `nginx -t`, naming it.
fn hosting_networks(cf: &mut ngx_conf_t, args: &[&[u8]]) -> Result<HostingRanges, ArgError> {
    let dir = full_path(cf)?;
    let mut list = HostingList::shipped();
    if args.get(1).is_some() {
        let path = full_path_of(cf, 2)?;
        let text = fs::read_to_string(&path)
            .map_err(|e| ArgError(format!("cannot read \"{path}\": {e}")))?;
        list.extend(&text)
            .map_err(|e| ArgError(format!("in \"{path}\": {e}")))?;
    }
    HostingRanges::build(Path::new(&dir), &list).map_err(|e| ArgError(e.to_string()))
}

extern "C" fn set_enable(
    cf: *mut ngx_conf_t,
    cmd: *mut ngx_command_t,
    conf: *mut c_void,
) -> *mut c_char {
    shim(cf, cmd, conf, |cf, lcf: &mut LocConf, args| {
        if !parse::flag(args[0])? {
            return Ok(());
        }
        let clcf = NgxHttpCoreModule::location_conf_mut(cf)
            .ok_or_else(|| ArgError("outside of a location".into()))?;
        let prefix_location = clcf.regex.is_null() && clcf.named() == 0 && clcf.exact_match() == 0;
        lcf.route = Some(if prefix_location {
            Route::Prefix(clcf.name.as_bytes().to_vec())
        } else {
            Route::LastSegment
        });
        clcf.handler = Some(handler::redirect_handler);
        let cscf = NgxHttpCoreModule::server_conf(cf)
            .ok_or_else(|| ArgError("outside of a server".into()))?;
        // SAFETY: nginx sets a server's `ctx` to its block's configuration context when it
        // creates the server, before its locations are read; it lives as long as the
        // configuration. Its location conf is the server's own, never this location's `lcf`.
        let server = unsafe { cscf.ctx.as_ref() }
            .and_then(ShortlinkModule::location_conf_mut)
            .ok_or_else(|| ArgError("outside of a server".into()))?;
        if server.server_route.is_none() {
            server.server_route = lcf.route.clone();
        }
        ShortlinkModule::main_conf_mut(cf)
            .ok_or_else(|| ArgError("has no http configuration".into()))?
            .used = true;
        Ok(())
    })
}

extern "C" fn set_status(
    cf: *mut ngx_conf_t,
    cmd: *mut ngx_command_t,
    conf: *mut c_void,
) -> *mut c_char {
    shim(cf, cmd, conf, |cf, _: &mut LocConf, _| {
        let clcf = NgxHttpCoreModule::location_conf_mut(cf)
            .ok_or_else(|| ArgError("outside of a location".into()))?;
        clcf.handler = Some(status::handler);
        ShortlinkModule::main_conf_mut(cf)
            .ok_or_else(|| ArgError("has no http configuration".into()))?
            .status = true;
        Ok(())
    })
}

/// The index of variable `name`, which nginx checks exists once the configuration is read.
fn variable_index(cf: &mut ngx_conf_t, name: &[u8]) -> Result<ngx_uint_t, ArgError> {
    // SAFETY: `cf.pool` is the configuration pool; nginx copies the name it keeps.
    let index = unsafe {
        let mut name = ngx_str_t::from_bytes(cf.pool, name)
            .ok_or_else(|| ArgError("cannot allocate memory".into()))?;
        ngx_http_get_variable_index(cf, &mut name)
    };
    ngx_uint_t::try_from(index).map_err(|_| ArgError("has an invalid variable".into()))
}

/// Compiles the directive's first argument (which may hold variables) for per-request evaluation.
fn compile_complex_value(cf: &mut ngx_conf_t) -> Result<*mut ngx_http_complex_value_t, ArgError> {
    let oom = || ArgError("cannot allocate memory".into());
    // SAFETY: `cf.pool` is the configuration pool; the value lives as long as the configuration.
    let cv: *mut ngx_http_complex_value_t =
        unsafe { ngx_pcalloc(cf.pool, mem::size_of::<ngx_http_complex_value_t>()) }.cast();
    if cv.is_null() {
        return Err(oom());
    }
    // SAFETY: args[1] exists (NGX_CONF_TAKE1) and is owned by the parser for this call; nginx
    // copies what it keeps. The compile struct is plain data, zero meaning "no flags".
    let rc = unsafe {
        let value = (*cf.args).elts.cast::<ngx_str_t>().add(1);
        let mut ccv: ngx_http_compile_complex_value_t = mem::zeroed();
        ccv.cf = cf;
        ccv.value = value;
        ccv.complex_value = cv;
        ngx_http_compile_complex_value(&mut ccv)
    };
    if rc != NGX_OK as isize {
        return Err(ArgError("has an invalid value".into()));
    }
    Ok(cv)
}

/// The directive's path argument, relative paths taken from the config file's directory as
/// nginx does for its own files.
fn full_path(cf: &mut ngx_conf_t) -> Result<String, ArgError> {
    full_path_of(cf, 1)
}

/// [`full_path`] of the directive's `index`th argument (1 = the first).
fn full_path_of(cf: &mut ngx_conf_t, index: usize) -> Result<String, ArgError> {
    // SAFETY: the caller names an argument the directive's arity guarantees (args[0] is the
    // name); ngx_conf_full_name replaces it in place with a string allocated from the cycle pool.
    let name = unsafe {
        let name = (*cf.args).elts.cast::<ngx_str_t>().add(index);
        if ngx_conf_full_name(cf.cycle, name, 1) != NGX_OK as isize {
            return Err(ArgError("cannot resolve the path".into()));
        }
        &*name
    };
    name.to_str()
        .map(str::to_owned)
        .map_err(|_| ArgError("path is not UTF-8".into()))
}

extern "C" fn add_apple_app(
    cf: *mut ngx_conf_t,
    cmd: *mut ngx_command_t,
    conf: *mut c_void,
) -> *mut c_char {
    shim(cf, cmd, conf, |_, mcf: &mut MainConf, args| {
        let args = texts(args)?;
        mcf.app_links.add_apple(&args).map_err(ArgError)
    })
}

extern "C" fn add_android_app(
    cf: *mut ngx_conf_t,
    cmd: *mut ngx_command_t,
    conf: *mut c_void,
) -> *mut c_char {
    shim(cf, cmd, conf, |_, mcf: &mut MainConf, args| {
        let args = texts(args)?;
        mcf.app_links.add_android(&args).map_err(ArgError)
    })
}

fn texts<'a>(args: &[&'a [u8]]) -> Result<Vec<&'a str>, ArgError> {
    args.iter()
        .map(|arg| std::str::from_utf8(arg).map_err(|_| ArgError("takes ASCII text".into())))
        .collect()
}
