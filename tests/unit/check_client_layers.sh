#!/bin/sh
# check_client_layers.sh NM ARCHIVE - fails when client/lib's objects call
# each other in a circle.
#
# The layers (client/lib/backend.h): the front end calls the back ends only
# through their tables, the back ends call the transport and the engine,
# never the front end; so the objects' "uses" graph must be a DAG. ARCHIVE
# is the in-tree libember.a: its members are client/lib's objects only. An
# object uses another when it leaves undefined a global symbol the other
# defines. Prints the edges, then the first cycle found, if any.
set -eu
nm=$1
archive=$2

"$nm" -A -g "$archive" | awk '
  # nm -A: "ARCHIVE:MEMBER:VALUE TYPE NAME", or "ARCHIVE:MEMBER: U NAME"
  {
    n = split($0, part, ":")
    obj = part[n - 1]
    sub(/\.c\.o$|\.o$/, "", obj)
    objs[obj] = 1
    sym = $NF
    type = $(NF - 1)
    if (type == "U") uses[obj, sym] = 1
    else if (type != "w" && type != "v") owner[sym] = obj
  }
  function visit(o,    p, k, path) {
    state[o] = 1  # on the stack
    stack[++depth] = o
    for (p in objs) {
      if (!((o, p) in edge)) continue
      if (state[p] == 1) {
        path = p
        for (k = depth; stack[k] != p; k--) path = stack[k] " -> " path
        path = p " -> " path
        cycle = path
        return 1
      }
      if (!state[p] && visit(p)) return 1
    }
    depth--
    state[o] = 2  # done: no cycle through it
    return 0
  }
  END {
    for (key in uses) {
      split(key, k, SUBSEP)
      if ((k[2] in owner) && owner[k[2]] != k[1]) edge[k[1], owner[k[2]]] = 1
    }
    n_edges = 0
    for (o in objs) {
      line = ""
      for (p in objs) if ((o, p) in edge) { line = line " " p; n_edges++ }
      if (line != "") print o " uses" line | "sort"
    }
    close("sort")
    for (o in objs) if (!state[o] && visit(o)) break
    if (cycle != "") {
      print "FAIL: client/lib objects call each other in a circle: " cycle
      exit 1
    }
    n = 0
    for (o in objs) n++
    print "ok: " n " objects, " n_edges " edges, no cycle"
  }'
