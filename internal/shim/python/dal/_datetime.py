"""datetime on dal's clock (the manual is dal._runtime's docstring, "strict").

``datetime.date`` and ``datetime.datetime`` are replaced in the ``datetime``
module by subclasses whose metaclass makes ``isinstance``/``issubclass`` hold
against real datetimes; every instance is a real one. Libraries that key
tables by exact type (sqlite3 adapters, PyYAML representers) get their
registrations for the fakes mirrored to the real classes.
"""

import sys
from collections.abc import Hashable as _Hashable

FAKE_TO_REAL = {}  # dal's datetime.date/datetime -> the real classes


def patch(dt, now_ns, clock=None):
    """Replace dt.date and dt.datetime by the fakes; now_ns() is the
    realtime clock in ns. With the strict clock (clock), datetime.now()
    reads it inline: one Python call and one constructor call."""
    real_date = dt.date
    real_datetime = dt.datetime
    if getattr(real_datetime, "_dal_fake", False):
        return
    real_tzinfo = dt.tzinfo
    NS = 1_000_000_000

    class _DateMeta(type):
        def __instancecheck__(cls, obj):
            if cls is FakeDate:
                return isinstance(obj, real_date)
            return type.__instancecheck__(cls, obj)

        def __subclasscheck__(cls, sub):
            if cls is FakeDate:
                return issubclass(sub, real_date)
            return type.__subclasscheck__(cls, sub)

    class _DatetimeMeta(_DateMeta):
        def __instancecheck__(cls, obj):
            if cls is FakeDatetime:
                return isinstance(obj, real_datetime)
            return type.__instancecheck__(cls, obj)

        def __subclasscheck__(cls, sub):
            if cls is FakeDatetime:
                return issubclass(sub, real_datetime)
            return type.__subclasscheck__(cls, sub)

    class FakeDate(real_date, metaclass=_DateMeta):
        """datetime.date whose today() reads dal's clock. Instances are real
        datetime.date objects."""
        _dal_fake = True

        def __new__(cls, *args, **kwargs):
            if cls is FakeDate:
                return real_date(*args, **kwargs)
            return real_date.__new__(cls, *args, **kwargs)

        @classmethod
        def today(cls):
            base = real_date if cls is FakeDate else cls
            return base.fromtimestamp(now_ns() // NS)

    utc = dt.timezone.utc
    timedelta = dt.timedelta
    from functools import partial
    # tz (None: naive local, "utc": naive UTC) -> (second, make(us) for that second)
    cache = {}
    local = [None, None]  # the naive local entry, for now()'s fast path

    def _make_tz(f, tzi, us):
        return real_datetime(f[0], f[1], f[2], f[3], f[4], f[5], us, tzi)

    def _make_fold(f, tzi, us):
        return real_datetime(f[0], f[1], f[2], f[3], f[4], f[5], us, tzi, fold=1)

    def _fromns(base, ns, tz, naive_utc):
        """The datetime at ns (floored to the microsecond, as datetime.now
        does). For the real class, the calendar fields of the current second
        are cached: constructing is ~6x cheaper than replace()."""
        s, r = divmod(ns, NS)
        us = r // 1000
        if base is real_datetime:
            key = "utc" if naive_utc else tz
            try:
                c = cache.get(key)
            except TypeError:  # an unhashable tzinfo
                c, key = None, cache
            if c is None or c[0] != s:
                d = real_datetime.fromtimestamp(s, utc if naive_utc else tz)
                if d.microsecond or key is cache:  # a sub-second UTC offset: no cache
                    d = d + timedelta(microseconds=us)
                    return d.replace(tzinfo=None) if naive_utc else d
                if len(cache) > 64:
                    cache.clear()
                tzi = None if naive_utc else tz
                f = (d.year, d.month, d.day, d.hour, d.minute, d.second)
                if d.fold:
                    make = partial(_make_fold, f, tzi)
                elif tzi is None:  # positional arguments only: the fastest call
                    make = partial(real_datetime, *f)
                else:
                    make = partial(_make_tz, f, tzi)
                c = cache[key] = (s, make)
                if key is None:
                    local[0], local[1] = s, make
            return c[1](us)
        d = base.fromtimestamp(s, utc if naive_utc else tz)
        d = d + timedelta(microseconds=us)
        return d.replace(tzinfo=None) if naive_utc else d

    def class_now(cls, tz=None):
        if tz is None and cls is FakeDatetime:
            s, r = divmod(now_ns(), NS)
            if local[0] == s:
                return local[1](r // 1000)
            return _fromns(real_datetime, s * NS + r, None, False)
        if tz is not None and not isinstance(tz, real_tzinfo):
            raise TypeError("tzinfo argument must be None or of a tzinfo subclass, not type '%s'" % type(tz).__name__)
        return _fromns(real_datetime if cls is FakeDatetime else cls, now_ns(), tz, False)

    make_now = getattr(clock, "make_now", None)
    if make_now is not None:
        # The hot path, datetime.now() on the strict clock (its read
        # inline, in the clock's own closure): while the read stays in the
        # cached second, the instance is made from its pickled state (the
        # second's 7 bytes, then the microsecond's 3), the constructor's
        # fastest form, a third cheaper than seven int arguments.
        epoch_s = clock.epoch_ns // NS

        def slow(x):
            """The instance at x (ns since the epoch's whole second) and
            the cache for its second, if it is naive local time."""
            sec = int(x // 1e9)
            d = _fromns(real_datetime, (epoch_s + sec) * NS + int(x - sec * 1e9), None, False)
            state = d.__reduce__()[1]
            if len(state) == 1 and len(state[0]) == 10:
                return d, (sec * 1e9, (sec + 1) * 1e9, state[0][:7])
            return d, None
        q = clock.quantum_ns
        step = timedelta(microseconds=q // 1000) if q > 0 and q % 1000 == 0 else None
        fast_now = make_now(real_datetime, slow, lambda tz: class_now(FakeDatetime, tz), step)
    else:
        def fast_now(tz=None):
            return class_now(FakeDatetime, tz)
    fast_now.__name__ = "now"
    fast_now.__doc__ = real_datetime.now.__doc__

    class FakeDatetime(real_datetime, metaclass=_DatetimeMeta):
        """datetime.datetime whose now/utcnow/today read dal's clock.
        Instances are real datetime.datetime objects."""
        _dal_fake = True

        def __new__(cls, *args, **kwargs):
            if cls is FakeDatetime:
                return real_datetime(*args, **kwargs)
            return real_datetime.__new__(cls, *args, **kwargs)

        # a staticmethod: no bound method per call; subclasses get the
        # classmethod (their now() makes instances of the subclass)
        now = staticmethod(fast_now)

        def __init_subclass__(cls, **kwargs):
            super().__init_subclass__(**kwargs)
            if "now" not in cls.__dict__:
                cls.now = classmethod(class_now)

        @classmethod
        def utcnow(cls):
            return _fromns(real_datetime if cls is FakeDatetime else cls, now_ns(), None, True)

        @classmethod
        def today(cls):
            return _fromns(real_datetime if cls is FakeDatetime else cls, now_ns(), None, False)

    for fake, real, name in ((FakeDate, real_date, "date"), (FakeDatetime, real_datetime, "datetime")):
        # As for the C types: an interned module name, a fresh qualname (pickle's memo
        # is by identity: other identities would change the pickled bytes).
        fake.__name__ = name
        fake.__qualname__ = bytes(name, "ascii").decode("ascii")
        fake.__module__ = sys.intern(real.__module__)
        fake.__doc__ = real.__doc__
    dt.date = FakeDate
    dt.datetime = FakeDatetime
    FAKE_TO_REAL[FakeDate] = real_date
    FAKE_TO_REAL[FakeDatetime] = real_datetime

    # pickle saves a class by module and qualname and checks that the name
    # leads back to it; datetime.datetime now leads to the fake, so real
    # instances pickle (and copy) through the fake, whose constructor makes
    # real instances again. Other interpreters read plain datetime.datetime.
    import copyreg

    def _reducer(fake):
        def reduce(obj):
            rv = obj.__reduce_ex__(4)
            return (fake,) + tuple(rv[1:])
        return reduce
    copyreg.pickle(real_date, _reducer(FakeDate))
    copyreg.pickle(real_datetime, _reducer(FakeDatetime))


def patch_sqlite3(mod):
    """sqlite3 keys adapters by exact type: registrations for the fake
    classes (its own datetime defaults included) also hold for the real
    classes, which every instance is."""
    adapters = getattr(mod, "adapters", None)
    if isinstance(adapters, dict):
        for key, fn in list(adapters.items()):
            if isinstance(key, tuple) and key and key[0] in FAKE_TO_REAL:
                adapters.setdefault((FAKE_TO_REAL[key[0]],) + key[1:], fn)
    orig = getattr(mod, "register_adapter", None)
    if orig is None or getattr(orig, "_dal", False):
        return

    def register_adapter(type, adapter):
        orig(type, adapter)
        real = FAKE_TO_REAL.get(type) if isinstance(type, _Hashable) else None
        if real is not None:
            orig(real, adapter)
    register_adapter.__doc__ = orig.__doc__
    register_adapter._dal = True
    for m in (mod, sys.modules.get("sqlite3.dbapi2")):
        if m is not None and getattr(m, "register_adapter", None) is orig:
            m.register_adapter = register_adapter


def patch_yaml_representer(mod):
    """PyYAML keys representers by exact type: the same mirroring."""
    Base = getattr(mod, "BaseRepresenter", None)
    if Base is None or getattr(Base, "_dal", False):
        return
    for cls in list(vars(mod).values()):
        if isinstance(cls, type) and issubclass(cls, Base):
            for attr in ("yaml_representers", "yaml_multi_representers"):
                d = cls.__dict__.get(attr)
                if isinstance(d, dict):
                    for k, v in list(d.items()):
                        if k in FAKE_TO_REAL:
                            d.setdefault(FAKE_TO_REAL[k], v)
    for name in ("add_representer", "add_multi_representer"):
        orig = getattr(Base, name).__func__

        def add(cls, data_type, representer, _orig=orig):
            _orig(cls, data_type, representer)
            real = FAKE_TO_REAL.get(data_type) if isinstance(data_type, _Hashable) else None
            if real is not None:
                _orig(cls, real, representer)
        add.__name__ = name
        add.__doc__ = orig.__doc__
        setattr(Base, name, classmethod(add))
    Base._dal = True
