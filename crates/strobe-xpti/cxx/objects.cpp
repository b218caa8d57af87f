// The C++ half of libstrobe_xpti.so: the interface objects XPTI 2026.2 hands
// out (tracepoints, payload/event/metadata views) and the per-event metadata
// map the 2026.2 headers place inside `trace_event_data_t`.
//
// Owns: the layouts of those objects (Itanium C++ ABI: each interface is a
// class whose only member is its vtable pointer, the virtual functions in the
// order the published header declares them, the virtual destructor first),
// the tracepoint allocator and the registry of code locations they come from.
// Must never: call back into a subscriber, hold a lock while calling the
// Rust side, or free a tracepoint's memory (deleted tracepoints are recycled,
// so a stale 64-bit id is recognised as dead rather than read from freed
// memory).
//
// The declarations below are strobe's own, written from the layouts of
// `xpti_data_types.h` / `xpti_trace_framework.h` (XPTI shipped with oneAPI
// 2026.2); the Rust side pins the same layouts (`strobe_trace::event`).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace strobe_xpti {

using metadata_map = std::unordered_map<uint32_t, int32_t>;

// ---- plain records (C layout, shared with Rust) ---------------------------

struct uid192 {
  uint64_t p1 = 0, p2 = 0, p3 = 0;
};

struct payload_rec {
  const char *name = nullptr;
  const char *stack_trace = nullptr;
  const char *source_file = nullptr;
  uint32_t line_no = UINT32_MAX;
  uint32_t column_no = UINT32_MAX;
  const void *code_ptr_va = nullptr;
  uint64_t internal = 0;
  uint64_t flags = 0;
  uid192 uid;
};

struct event_rec {
  uint64_t unique_id = 0;
  uint64_t data_id = 0;
  uint64_t instance_id = 0;
  uint16_t event_type = 0;
  uint16_t activity_type = 0;
  uint32_t unused = 0;
  uint64_t source_id = 0;
  uint64_t target_id = 0;
  payload_rec *payload = nullptr;
  metadata_map metadata;
  void *global_user_data = nullptr;
  uint64_t flags = 0;
};

static_assert(sizeof(payload_rec) == 80, "payload_t is 80 bytes");
static_assert(sizeof(metadata_map) == 56, "the metadata map fills the reserved bytes");
static_assert(offsetof(event_rec, payload) == 48, "reserved.payload at 48");
static_assert(offsetof(event_rec, metadata) == 56, "reserved.metadata at 56");
static_assert(offsetof(event_rec, global_user_data) == 112, "global_user_data at 112");
static_assert(sizeof(event_rec) == 128, "trace_event_data_t is 128 bytes");

// Result codes and flags (xpti::result_t, payload_flag_t, trace_event_flag_t).
constexpr int32_t kSuccess = 0;
constexpr int32_t kFalse = 1;
constexpr int32_t kDuplicate = int32_t(0x80004003u);
constexpr int32_t kInvalidArg = int32_t(0x80004006u);
constexpr uint64_t kNameAvailable = 1, kSourceFileAvailable = 2, kCodePointerAvailable = 4,
                   kLineAvailable = 8, kColumnAvailable = 16, kRegistered = 1u << 15,
                   kHashAvailable = 2u << 16;
constexpr uint64_t kEventFlags = 1 | 8 | 16 | 32; // uid, event type, activity, payload
constexpr uint16_t kAlgorithmEvent = 2, kActiveActivity = 1;

// ---- the interfaces (vtable order as published) ---------------------------

struct payload_if {
  virtual ~payload_if() {}
  virtual const char *name() const = 0;
  virtual const char *source_file() const = 0;
  virtual uint32_t line_no() const = 0;
  virtual uint32_t column_no() const = 0;
  virtual uint64_t payload_flags() const = 0;
  virtual int32_t name_string_id() const = 0;
  virtual int32_t file_string_id() const = 0;
  virtual uint64_t uid64() const = 0;
  virtual bool is_valid() const = 0;
  virtual payload_rec *payload_ref() = 0;
};

struct metadata_if {
  virtual ~metadata_if() {}
  virtual int32_t first_item(char **key, int32_t &value) = 0;
  virtual int32_t next_item(char **key, int32_t &value) = 0;
  virtual int32_t add_item(const char *key, int32_t value) = 0;
  virtual size_t count() = 0;
};

struct event_if {
  virtual ~event_if() {}
  virtual payload_if *payload() = 0;
  virtual metadata_if *metadata() = 0;
  virtual uint64_t uid64() const = 0;
  virtual uint64_t instance() const = 0;
  virtual uint16_t event_type() const = 0;
  virtual uint16_t activity_type() const = 0;
  virtual uint64_t source_uid64() const = 0;
  virtual uint64_t target_uid64() const = 0;
  virtual uint64_t event_flags() const = 0;
  virtual void set_activity_type(int32_t type) = 0;
  virtual void set_event_type(uint16_t type) = 0;
  virtual payload_rec *payload_ref() = 0;
  virtual event_rec *event_ref() = 0;
};

struct tracepoint_if {
  virtual ~tracepoint_if() {}
  virtual payload_if *payload() = 0;
  virtual metadata_if *metadata() = 0;
  virtual event_if *event() = 0;
  virtual uint64_t uid64() const = 0;
  virtual uint64_t instance() const = 0;
  virtual event_rec *event_ref() = 0;
  virtual payload_rec *payload_ref() = 0;
};

} // namespace strobe_xpti

using namespace strobe_xpti;

// The Rust half (exported by the same library).
extern "C" {
uint32_t strobe_xpti_intern(const char *s);
const char *xptiLookupString(uint32_t id);
void xptiSetUniversalId(uint64_t uid);
}

namespace {

/// Serialises constructing and growing metadata maps (rare: when an event is
/// annotated); readers iterate without it, as with Intel's framework.
std::mutex g_metadata_lock;

/// An event made outside this file (by the Rust framework, or by C code with
/// `= {0}`) has all-zero reserved bytes until its map is built here; a
/// constructed libstdc++ map always has a non-null bucket pointer.
bool map_is_built(const event_rec *e) {
  void *first;
  std::memcpy(&first, &e->metadata, sizeof first);
  return first != nullptr;
}

metadata_map *map_of(event_rec *e) {
  if (!map_is_built(e)) {
    std::lock_guard<std::mutex> g(g_metadata_lock);
    if (!map_is_built(e))
      new (&e->metadata) metadata_map();
  }
  return &e->metadata;
}

struct location;

/// What every interface object says about an event and its payload. A
/// tracepoint owns both records; a view points at records made elsewhere.
class point final : public payload_if, public event_if, public metadata_if, public tracepoint_if {
public:
  /// Marks a live tracepoint (a recycled one is `kDead`).
  uint64_t magic = 0;
  uint64_t instance_no = 0;
  /// A tracepoint's location (null for a view).
  location *loc = nullptr;
  payload_rec own_payload;
  event_rec own_event;
  payload_rec *pl = &own_payload;
  event_rec *ev = &own_event;
  metadata_map::iterator cursor;

  static constexpr uint64_t kLive = 0x73747262'74706c76; // "strbtplv"
  static constexpr uint64_t kDead = 0x73747262'74706464;

  // payload_if
  const char *name() const override { return pl->name ? pl->name : "<unknown>"; }
  const char *source_file() const override {
    return pl->source_file ? pl->source_file : "<unknown-file>";
  }
  uint32_t line_no() const override { return pl->line_no; }
  uint32_t column_no() const override { return pl->column_no; }
  uint64_t payload_flags() const override { return pl->flags; }
  int32_t name_string_id() const override;
  int32_t file_string_id() const override;
  uint64_t uid64() const override { return ev ? ev->unique_id : pl->internal; }
  bool is_valid() const override {
    return (pl->flags & (kNameAvailable | kSourceFileAvailable)) != 0;
  }
  payload_rec *payload_ref() override { return pl; }

  // event_if
  payload_if *payload() override { return this; }
  metadata_if *metadata() override { return this; }
  uint64_t instance() const override { return instance_no; }
  uint16_t event_type() const override { return ev->event_type; }
  uint16_t activity_type() const override { return ev->activity_type; }
  uint64_t source_uid64() const override { return ev->source_id; }
  uint64_t target_uid64() const override { return ev->target_id; }
  uint64_t event_flags() const override { return ev->flags; }
  void set_activity_type(int32_t type) override { ev->activity_type = uint16_t(type); }
  void set_event_type(uint16_t type) override { ev->event_type = type; }
  event_rec *event_ref() override { return ev; }

  // metadata_if
  int32_t first_item(char **key, int32_t &value) override {
    cursor = map_of(ev)->begin();
    return current(key, value);
  }
  int32_t next_item(char **key, int32_t &value) override {
    if (cursor != map_of(ev)->end())
      ++cursor;
    return current(key, value);
  }
  int32_t add_item(const char *key, int32_t value) override;
  size_t count() override { return map_of(ev)->size(); }

  // tracepoint_if
  event_if *event() override { return this; }

private:
  int32_t current(char **key, int32_t &value) {
    if (cursor == map_of(ev)->end())
      return kFalse;
    if (key)
      *key = const_cast<char *>(xptiLookupString(cursor->first));
    value = cursor->second;
    return kSuccess;
  }
};

// ---- code locations -------------------------------------------------------

constexpr int32_t kNotInterned = -2;

/// One code location (name, file, line, column): its strings, copied once
/// and kept for the process, and how many tracepoints it has had.
struct location {
  std::string func, file;
  uint32_t line, col;
  uint64_t flags;
  /// 32-bit hashes of the strings (the payload's legacy uid fields, as
  /// Intel's framework fills them outside its strict-hash mode).
  uint32_t func_hash, file_hash;
  /// String-table ids, interned on first request (kNotInterned until then):
  /// creating a location stays off the string table's lock.
  std::atomic<int32_t> func_id{kNotInterned}, file_id{kNotInterned};
  /// Named "<unknown>" here: the caller gave no name.
  bool renamed = false;
  std::atomic<uint64_t> instances{0};
};

/// A location as text, for lookups: views of the caller's strings, or of a
/// location's own copies once stored (so a lookup allocates nothing).
struct location_key {
  std::string_view func, file;
  uint32_t line, col;
  /// Computed once per lookup, carried into the stored key.
  size_t hash;
  location_key(std::string_view fn, std::string_view fl, uint32_t ln, uint32_t cl)
      : func(fn), file(fl), line(ln), col(cl) {
    size_t h = std::hash<std::string_view>()(func);
    h = h * 31 + std::hash<std::string_view>()(file);
    hash = h * 31 + (size_t(line) << 20 | col);
  }
  bool operator==(const location_key &o) const {
    return hash == o.hash && line == o.line && col == o.col && func == o.func && file == o.file;
  }
};

struct location_key_hash {
  size_t operator()(const location_key &k) const { return k.hash; }
};

std::mutex g_locations_lock;
std::unordered_map<location_key, location *, location_key_hash> *g_locations;

bool same_text(const char *a, const std::string &b) {
  return a ? std::strcmp(a, b.c_str()) == 0 : b.empty();
}

/// A thread's last locations by the caller's pointers; a hit is confirmed
/// by comparing the text (callers may reuse a buffer for another name).
struct cached_location {
  const char *func = nullptr, *file = nullptr;
  uint32_t line = 0, col = 0;
  location *loc = nullptr;
};
constexpr size_t kCacheSlots = 64;
thread_local cached_location t_cache[kCacheSlots];

/// A location string's id in the string table, interned on first request.
int32_t interned(std::atomic<int32_t> &id, const std::string &text) {
  int32_t v = id.load(std::memory_order_acquire);
  if (v == kNotInterned) {
    v = int32_t(strobe_xpti_intern(text.c_str()));
    id.store(v, std::memory_order_release);
  }
  return v;
}

/// The stored location for `key`, made (strings copied; string ids are
/// interned later, on request) on first sight, under one lock for the
/// lookup and the insertion.
location *stored_location(const location_key &key) {
  std::lock_guard<std::mutex> g(g_locations_lock);
  if (!g_locations) {
    g_locations = new std::unordered_map<location_key, location *, location_key_hash>();
    g_locations->reserve(4096);
  }
  auto it = g_locations->find(key);
  if (it != g_locations->end())
    return it->second;
  location *fresh = new location();
  fresh->func.assign(key.func);
  fresh->file.assign(key.file);
  fresh->line = key.line;
  fresh->col = key.col;
  fresh->flags = 0;
  if (!fresh->func.empty())
    fresh->flags |= kNameAvailable;
  if (!fresh->file.empty())
    fresh->flags |= kSourceFileAvailable | kLineAvailable | kColumnAvailable;
  if (fresh->flags == 0) {
    // Intel's framework names a location it cannot describe "unknown".
    fresh->func = "<unknown>";
    fresh->flags = kNameAvailable;
    fresh->renamed = true;
  }
  fresh->func_hash = uint32_t(std::hash<std::string_view>()(fresh->func));
  fresh->file_hash = uint32_t(std::hash<std::string_view>()(fresh->file));
  if (fresh->file.empty())
    fresh->file_id = -1;
  // The stored key views the location's own copies (the "<unknown>"
  // renaming stays out of the key: the caller's text was empty).
  location_key own = key;
  own.func = fresh->renamed ? std::string_view() : std::string_view(fresh->func);
  own.file = std::string_view(fresh->file);
  g_locations->emplace(own, fresh);
  return fresh;
}

location *find_location(const char *func, const char *file, uint32_t line, uint32_t col) {
  size_t slot = ((uintptr_t(func) >> 3) ^ (uintptr_t(file) >> 5) ^ line * 2654435761u ^ col) %
                kCacheSlots;
  cached_location &c = t_cache[slot];
  if (c.loc && c.func == func && c.file == file && c.line == line && c.col == col &&
      (c.loc->renamed ? !func || !*func : same_text(func, c.loc->func)) &&
      same_text(file, c.loc->file))
    return c.loc;

  location_key key{func ? std::string_view(func) : std::string_view(),
                   file ? std::string_view(file) : std::string_view(), line, col};
  location *loc = stored_location(key);
  c = cached_location{func, file, line, col, loc};
  return loc;
}

// ---- tracepoint storage ---------------------------------------------------

/// Tracepoints live in slabs that are never freed: a 64-bit id is the
/// tracepoint's address, and an id is valid when its slab (the id rounded
/// down to the slab alignment) is one of ours, it lies on a slot boundary
/// and the slot is live. Slabs are found through an insert-only open-address
/// table, so validating an id costs the same however many slabs exist.
constexpr size_t kSlabPoints = 1024;
constexpr size_t kSlabAlign = size_t(1) << 19; // > kSlabPoints * sizeof(point)
constexpr size_t kMaxSlabs = 1 << 15;
constexpr size_t kSlabTable = kMaxSlabs * 2;
static_assert(kSlabPoints * sizeof(point) <= kSlabAlign, "a slab fits its alignment");
std::atomic<uintptr_t> g_slab_table[kSlabTable];
std::atomic<size_t> g_slab_count{0};

size_t slab_hash(uintptr_t base) { return (base / kSlabAlign * 0x9E3779B97F4A7C15ull) >> 48; }

void remember_slab(uintptr_t base) {
  for (size_t i = slab_hash(base);; i = (i + 1) % kSlabTable) {
    uintptr_t expected = 0;
    if (g_slab_table[i].compare_exchange_strong(expected, base, std::memory_order_acq_rel))
      return;
  }
}

bool is_slab(uintptr_t base) {
  for (size_t i = slab_hash(base);; i = (i + 1) % kSlabTable) {
    uintptr_t v = g_slab_table[i].load(std::memory_order_acquire);
    if (v == base)
      return true;
    if (v == 0)
      return false;
  }
}

std::mutex g_pool_lock;
std::vector<point *> *g_pool; // free slots, under g_pool_lock
char *g_fresh_slab = nullptr; // slab being carved, under g_pool_lock
size_t g_fresh_used = kSlabPoints;

/// A thread's own free slots (no lock on the hot path).
struct local_pool {
  std::vector<point *> free;
  ~local_pool() {
    if (free.empty())
      return;
    std::lock_guard<std::mutex> g(g_pool_lock);
    if (!g_pool)
      g_pool = new std::vector<point *>();
    g_pool->insert(g_pool->end(), free.begin(), free.end());
  }
};
thread_local local_pool t_pool;
constexpr size_t kLocalMax = 256, kBatch = 64;

/// Raw memory for one tracepoint, or null when out of memory.
void *take_slot() {
  if (!t_pool.free.empty()) {
    point *p = t_pool.free.back();
    t_pool.free.pop_back();
    return p;
  }
  std::lock_guard<std::mutex> g(g_pool_lock);
  if (g_pool && !g_pool->empty()) {
    size_t n = g_pool->size() < kBatch ? g_pool->size() : kBatch;
    t_pool.free.insert(t_pool.free.end(), g_pool->end() - n, g_pool->end());
    g_pool->resize(g_pool->size() - n);
    point *p = t_pool.free.back();
    t_pool.free.pop_back();
    return p;
  }
  if (g_fresh_used == kSlabPoints) {
    size_t n = g_slab_count.load(std::memory_order_relaxed);
    if (n == kMaxSlabs)
      return nullptr;
    char *slab = static_cast<char *>(std::aligned_alloc(kSlabAlign, kSlabAlign));
    if (!slab)
      return nullptr;
    std::memset(slab, 0, sizeof(point) * kSlabPoints);
    remember_slab(uintptr_t(slab));
    g_slab_count.store(n + 1, std::memory_order_release);
    g_fresh_slab = slab;
    g_fresh_used = 0;
  }
  return g_fresh_slab + sizeof(point) * g_fresh_used++;
}

void give_slot(point *p) {
  t_pool.free.push_back(p);
  if (t_pool.free.size() > kLocalMax) {
    std::lock_guard<std::mutex> g(g_pool_lock);
    if (!g_pool)
      g_pool = new std::vector<point *>();
    g_pool->insert(g_pool->end(), t_pool.free.end() - kBatch, t_pool.free.end());
    t_pool.free.resize(t_pool.free.size() - kBatch);
  }
}

/// The live tracepoint whose 64-bit id is `uid`, or null.
point *live_point(uint64_t uid) {
  uintptr_t base = uintptr_t(uid) & ~(kSlabAlign - 1);
  if (uid == 0 || !is_slab(base))
    return nullptr;
  uintptr_t offset = uintptr_t(uid) - base;
  if (offset % sizeof(point) != 0 || offset / sizeof(point) >= kSlabPoints)
    return nullptr;
  point *p = reinterpret_cast<point *>(uid);
  return p->magic == point::kLive ? p : nullptr;
}

point *as_point(tracepoint_if *tp) {
  return tp ? live_point(uint64_t(static_cast<point *>(tp))) : nullptr;
}

thread_local tracepoint_if *t_scope = nullptr;
thread_local tracepoint_if *t_temp_scope = nullptr;

/// Views of events made outside this file, one per event, kept for the
/// process (their events are never freed either).
std::mutex g_views_lock;
std::unordered_map<uint64_t, point *> *g_views;

int32_t add_to_map(event_rec *e, const char *key, int32_t value) {
  uint32_t key_id = strobe_xpti_intern(key);
  if (key_id == UINT32_MAX)
    return kInvalidArg;
  metadata_map *m = map_of(e);
  std::lock_guard<std::mutex> g(g_metadata_lock);
  return m->emplace(key_id, value).second ? kSuccess : kDuplicate;
}

int32_t point::name_string_id() const {
  // A view's payload strings belong to the Rust side's registry: interning
  // them again finds their ids.
  return loc ? interned(loc->func_id, loc->func)
             : pl->name ? int32_t(strobe_xpti_intern(pl->name)) : -1;
}

int32_t point::file_string_id() const {
  return loc ? interned(loc->file_id, loc->file)
             : pl->source_file ? int32_t(strobe_xpti_intern(pl->source_file)) : -1;
}

int32_t point::add_item(const char *key, int32_t value) {
  return key ? add_to_map(ev, key, value) : kInvalidArg;
}

} // namespace

extern "C" {

/// A new tracepoint (one instance of its code location), or null.
tracepoint_if *strobe_xpti_tp_create(const char *func, const char *file, uint32_t line,
                                     uint32_t col, void *code_ptr) {
  try {
    location *loc = find_location(func, file, line, col);
    void *mem = take_slot();
    if (!mem)
      return nullptr;
    point *p = new (mem) point();
    p->instance_no = loc->instances.fetch_add(1, std::memory_order_relaxed) + 1;
    p->loc = loc;
    uint64_t uid = uint64_t(p);
    payload_rec &pl = p->own_payload;
    pl.name = loc->func.c_str();
    pl.source_file = loc->file.empty() ? nullptr : loc->file.c_str();
    pl.line_no = loc->file.empty() ? UINT32_MAX : line;
    pl.column_no = loc->file.empty() ? UINT32_MAX : col;
    pl.code_ptr_va = code_ptr;
    pl.flags = loc->flags | kRegistered | kHashAvailable | (code_ptr ? kCodePointerAvailable : 0);
    pl.internal = uid;
    pl.uid.p1 = uint64_t(loc->file_hash) << 32 | (loc->file.empty() ? 0 : line);
    pl.uid.p2 = uint64_t(loc->func_hash);
    pl.uid.p3 = p->instance_no;
    event_rec &ev = p->own_event;
    ev.unique_id = uid;
    ev.data_id = ev.instance_id = p->instance_no;
    ev.event_type = kAlgorithmEvent;
    ev.activity_type = kActiveActivity;
    ev.payload = &pl;
    ev.flags = kEventFlags;
    std::atomic_thread_fence(std::memory_order_release);
    p->magic = point::kLive;
    return p;
  } catch (...) {
    return nullptr;
  }
}

/// Ends a tracepoint; its slot is recycled.
int32_t strobe_xpti_tp_delete(tracepoint_if *tp) {
  point *p = as_point(tp);
  if (!p)
    return kInvalidArg;
  try {
    if (t_scope == tp)
      t_scope = nullptr;
    if (t_temp_scope == tp)
      t_temp_scope = nullptr;
    p->~point();
    // Leave an empty object behind (it owns no memory) so a stale id reads
    // a dead slot; the next create builds over it.
    point *dead = new (static_cast<void *>(p)) point();
    dead->magic = point::kDead;
    give_slot(dead);
    return kSuccess;
  } catch (...) {
    return kInvalidArg;
  }
}

const tracepoint_if *strobe_xpti_tp_register_scope(const char *func, const char *file,
                                                   uint32_t line, uint32_t col, void *code_ptr) {
  t_temp_scope = strobe_xpti_tp_create(func, file, line, col, code_ptr);
  return t_temp_scope;
}

const tracepoint_if *strobe_xpti_scope_get() { return t_scope; }

int32_t strobe_xpti_scope_set(tracepoint_if *tp) {
  if (!tp)
    return kInvalidArg;
  t_scope = tp;
  xptiSetUniversalId(tp->uid64());
  return kSuccess;
}

void strobe_xpti_scope_unset() {
  t_scope = nullptr;
  xptiSetUniversalId(0);
}

/// The event / payload record of a live tracepoint id, or null.
event_rec *strobe_xpti_tp_event(uint64_t uid) {
  point *p = live_point(uid);
  return p ? p->ev : nullptr;
}

payload_rec *strobe_xpti_tp_payload(uint64_t uid) {
  point *p = live_point(uid);
  return p ? p->pl : nullptr;
}

/// A view over an event and payload made outside this file, made once per
/// id and kept for the process (such events are never freed either).
static point *view_of(uint64_t uid, event_rec *event, payload_rec *payload) {
  try {
    std::lock_guard<std::mutex> g(g_views_lock);
    if (!g_views)
      g_views = new std::unordered_map<uint64_t, point *>();
    point *&v = (*g_views)[uid];
    if (!v) {
      v = new point();
      v->pl = payload ? payload : &v->own_payload;
      v->ev = event ? event : &v->own_event;
      v->own_event.unique_id = uid;
      v->own_event.payload = v->pl;
      v->instance_no = event ? event->instance_id : 0;
    }
    return v;
  } catch (...) {
    return nullptr;
  }
}

/// The event interface of an id: a live tracepoint's own, else a view of
/// `event` (the Rust side's event of that id), else null.
const event_if *strobe_xpti_lookup_event(uint64_t uid, event_rec *event, payload_rec *payload) {
  if (point *p = live_point(uid))
    return p;
  point *v = event ? view_of(uid, event, payload) : nullptr;
  return v;
}

/// The payload interface of an id, as for events.
const payload_if *strobe_xpti_lookup_payload(uint64_t uid, event_rec *event,
                                             payload_rec *payload) {
  if (point *p = live_point(uid))
    return p;
  point *v = payload ? view_of(uid, event, payload) : nullptr;
  return v;
}

/// Adds key = value to an event's map (built on first use).
int32_t strobe_xpti_md_add(event_rec *e, const char *key, int32_t value) {
  if (!e || !key)
    return kInvalidArg;
  try {
    return add_to_map(e, key, value);
  } catch (...) {
    return kInvalidArg;
  }
}

/// The event's metadata map (built on first use), or null.
metadata_map *strobe_xpti_md_query(event_rec *e) {
  if (!e)
    return nullptr;
  try {
    return map_of(e);
  } catch (...) {
    return nullptr;
  }
}

} // extern "C"
