//===- emu_races.cpp - the emulated device's race and bounds checker ------===//
#include "emu_races.h"

#include <algorithm>
#include <cstdio>
#include <iterator>

namespace emu {

void joinClock(VectorClock &into, const VectorClock &from) {
  if (into.size() < from.size())
    into.resize(from.size(), 0);
  for (size_t i = 0; i < from.size(); ++i)
    into[i] = std::max(into[i], from[i]);
}

void RaceChecker::allocate(uintptr_t base, size_t bytes) {
  allocations[base] = bytes;
  allocated += bytes;
}

void RaceChecker::release(uintptr_t base) {
  auto it = allocations.find(base);
  if (it == allocations.end())
    return;
  // A new allocation at the same addresses starts with no history.
  splitAt(base);
  splitAt(base + it->second);
  cells.erase(cells.lower_bound(base), cells.lower_bound(base + it->second));
  allocated -= it->second;
  allocations.erase(it);
}

bool RaceChecker::inAllocation(uintptr_t p, size_t bytes) const {
  auto it = allocations.upper_bound(p);
  if (it == allocations.begin())
    return false;
  --it;
  return p + bytes <= it->first + it->second;
}

std::string RaceChecker::where(uintptr_t p, size_t bytes) const {
  char text[160];
  auto it = allocations.upper_bound(p);
  if (it != allocations.begin()) {
    --it;
    if (p < it->first + it->second) {
      std::snprintf(text, sizeof(text),
                    "bytes %zu..%zu of the %zu-byte allocation at %#zx",
                    size_t(p - it->first), size_t(p - it->first + bytes),
                    it->second, size_t(it->first));
      return text;
    }
  }
  std::snprintf(text, sizeof(text), "%zu bytes at %#zx", bytes, size_t(p));
  return text;
}

uint32_t RaceChecker::intern(const std::string &name) {
  auto [it, inserted] = nameIds.try_emplace(name, uint32_t(names.size()));
  if (inserted)
    names.push_back(name);
  return it->second;
}

void RaceChecker::splitAt(uintptr_t at) {
  auto it = cells.upper_bound(at);
  if (it == cells.begin())
    return;
  --it;
  if (it->first == at || it->second.end <= at)
    return;
  Cell tail = it->second;
  it->second.end = at;
  cells.emplace(at, std::move(tail));
}

std::string RaceChecker::access(int stream, uint64_t clock,
                                const VectorClock &seen, uintptr_t p,
                                size_t bytes, bool write,
                                const std::string &what,
                                std::string (*streamName)(int)) {
  if (bytes == 0)
    return {};
  if (!inAllocation(p, bytes))
    return what + " on " + streamName(stream) + " " +
           (write ? "writes " : "reads ") + where(p, bytes) +
           (inAllocation(p, 1) ? ", past the allocation's end"
                               : ", outside every device allocation") +
           " (an illegal address on a GPU)";
  const uintptr_t end = p + bytes;
  splitAt(p);
  splitAt(end);
  // Fill the gaps with fresh cells, so that every byte of the range has one.
  for (uintptr_t at = p; at < end;) {
    auto it = cells.lower_bound(at);
    if (it != cells.end() && it->first == at) {
      at = it->second.end;
      continue;
    }
    uintptr_t gapEnd = it == cells.end() ? end : std::min(end, it->first);
    cells.emplace(at, Cell{gapEnd, {}, {}});
    at = gapEnd;
  }
  auto ordered = [&](const Epoch &e) {
    return e.stream < 0 || e.stream == stream ||
           (size_t(e.stream) < seen.size() && seen[e.stream] >= e.clock);
  };
  const Epoch me{stream, clock, intern(what)};
  std::string report;
  for (auto it = cells.lower_bound(p); it != cells.end() && it->first < end;
       ++it) {
    Cell &cell = it->second;
    const Epoch *conflict = nullptr;
    const char *kind = nullptr;
    if (!ordered(cell.write)) {
      conflict = &cell.write;
      kind = write ? "writes" : "reads";
    } else if (write) {
      for (const Epoch &r : cell.reads)
        if (!ordered(r)) {
          conflict = &r;
          kind = "overwrites";
          break;
        }
    }
    if (conflict && report.empty()) {
      bool afterWrite = conflict == &cell.write;
      report = "race: " + what + " on " + streamName(stream) + " " + kind +
               " " + where(it->first, cell.end - it->first) +
               (afterWrite ? ", written by " : ", still being read by ") +
               names[conflict->what] + " on " + streamName(conflict->stream) +
               ", with no event wait ordering the two (" +
               (afterWrite ? "a missing cudaStreamWaitEvent before the "
                             "reader"
                           : "the buffer reused before its reader on the "
                             "other stream finished") +
               ")";
    }
    if (write) {
      cell.write = me;
      cell.reads.clear();
    } else {
      auto same =
          std::find_if(cell.reads.begin(), cell.reads.end(),
                       [&](const Epoch &e) { return e.stream == stream; });
      if (same != cell.reads.end())
        *same = me;
      else
        cell.reads.push_back(me);
    }
  }
  return report;
}

} // namespace emu
