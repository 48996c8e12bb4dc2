//! The generic setter of value directives, in the manner of nginx's `ngx_conf_set_*_slot`: one
//! `extern "C"` handler per stored type instead of one per directive. The field is chosen by
//! `ngx_command_t.offset` (`offset_of!` on the conf struct); the parser, an optional check
//! before it and an optional post step after it travel in `ngx_command_t.post` as a [`Slot`].
//! Rows are written with [`value!`], which also makes the compiler check the field's type.

use std::ffi::{c_char, c_void};
use std::ptr;

use nginx_sys::{
    ngx_command_t, ngx_conf_t, ngx_str_t, ngx_uint_t, NGX_HTTP_LOC_CONF_OFFSET,
    NGX_HTTP_MAIN_CONF_OFFSET,
};

use super::parse::ArgError;
use super::shim::{duplicate, shim};
use super::{LocConf, MainConf};

/// A conf struct and the `ngx_command_t.conf` offset under which nginx hands it to a setter.
pub trait Level {
    const CONF: usize;
}

impl Level for LocConf {
    const CONF: usize = NGX_HTTP_LOC_CONF_OFFSET;
}

impl Level for MainConf {
    const CONF: usize = NGX_HTTP_MAIN_CONF_OFFSET;
}

/// What a value directive does with its arguments: `parse` them (with the parser context, for
/// the few that resolve a path, a variable or an address at config time), after an optional
/// `check` against the rest of the conf struct (exclusive directives), and an optional `post`
/// step once the value is stored (nginx's `cmd->post` handler).
pub struct Slot<C, T> {
    pub parse: Parse<T>,
    pub check: Option<Check<C>>,
    pub post: Option<Post<C>>,
}

pub type Parse<T> = fn(&mut ngx_conf_t, &[&[u8]]) -> Result<T, ArgError>;
pub type Check<C> = fn(&C) -> Result<(), ArgError>;
pub type Post<C> = fn(&mut C, &[&[u8]]);

/// A row for [`set_value`]; write it with [`value!`], which derives `offset` and `_field` from
/// one field name. `_field` is never called: it only makes the compiler check that the field is
/// the `Option<T>` that `slot` parses into.
pub const fn row<C: Level, T>(
    name: ngx_str_t,
    type_: u32,
    offset: usize,
    slot: &'static Slot<C, T>,
    _field: fn(&C) -> &Option<T>,
) -> ngx_command_t {
    ngx_command_t {
        name,
        type_: type_ as ngx_uint_t,
        set: Some(set_value::<C, T>),
        conf: C::CONF,
        offset,
        post: ptr::from_ref(slot).cast_mut().cast(),
    }
}

/// One value directive: name, contexts and arity, the `Option` field it sets, and its parser
/// (`|cf, args| ...`), optionally followed by `check = fn(&C)` and `post = fn(&mut C, args)`.
macro_rules! value {
    ($name:literal, $type:expr, $conf:ident . $field:ident, $parse:expr
        $(, check = $check:expr)? $(, post = $post:expr)? $(,)?) => {
        $crate::conf::slot::row::<$conf, _>(
            ::ngx::ngx_string!($name),
            $type,
            ::std::mem::offset_of!($conf, $field),
            &$crate::conf::slot::Slot {
                parse: $parse,
                check: $crate::conf::slot::value!(@opt $($check)?),
                post: $crate::conf::slot::value!(@opt $($post)?),
            },
            |conf: &$conf| &conf.$field,
        )
    };
    (@opt) => { None };
    (@opt $f:expr) => { Some($f) };
}
pub(crate) use value;

/// The one setter of every value directive: refuses a second occurrence with "is duplicate",
/// runs the row's check, parses and stores, then runs the row's post step.
extern "C" fn set_value<C, T>(
    cf: *mut ngx_conf_t,
    cmd: *mut ngx_command_t,
    conf: *mut c_void,
) -> *mut c_char {
    shim(cf, cmd, conf, |cf, conf: &mut C, args| {
        // SAFETY: nginx passes the row of the directive being set. Rows naming
        // `set_value::<C, T>` are built only by `row` (this fn is private to this file), which
        // stores a `&'static Slot<C, T>` in `post`, called only by `value!`, which passes the
        // `offset_of!` of the same field of `C` whose accessor proved it an `Option<T>`.
        let (slot, offset) = unsafe { (&*(*cmd).post.cast::<Slot<C, T>>(), (*cmd).offset) };
        // SAFETY: `conf` is the `C` that field is in (see above).
        let field = unsafe { ptr::from_mut(conf).byte_add(offset).cast::<Option<T>>() };
        // SAFETY: `field` is valid and aligned (see above); this shared read ends here.
        duplicate(unsafe { &*field })?;
        if let Some(check) = slot.check {
            check(conf)?;
        }
        let value = (slot.parse)(cf, args)?;
        // SAFETY: `field` is still valid: `conf` was only read since it was derived.
        unsafe { *field = Some(value) };
        if let Some(post) = slot.post {
            post(conf, args);
        }
        Ok(())
    })
}
