// The web playground served at "/": one self-contained HTML page (CSS and JavaScript
// inline, no external resources) that chats with /v1/chat/completions, streaming, with
// sampling controls and a live tokens-per-second readout.
#pragma once

#include <string_view>

namespace pagoda {

std::string_view playground_html();

}  // namespace pagoda
