// JSON to template values: a request's messages, tools and chat_template_kwargs become
// the variables a chat template reads. Objects keep their key order (parse them as
// nlohmann::ordered_json), as Python's json.loads does, because the order shows in what
// templates print (tojson of a tool, dict iteration).
//
// Cost: one walk of the value. Pure functions; thread-safe.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "jinja/value.h"

namespace pagoda {

jinja::Value jinja_from_json(const nlohmann::ordered_json& j);

}  // namespace pagoda
