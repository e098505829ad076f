// The live tree view served at / by grove serve: one self-contained HTML page (tree_view_page.cc)
// that draws each step's draft tree from GET /v1/steps server-sent events.
#pragma once

namespace grove::serve {

extern const char kTreeViewPage[];

}  // namespace grove::serve
