// Forwarding include for the Ulysses layer (ulysses_layer.cpp); the random fill is the testing library's.
#pragma once
#include "xstage/testing/attn_random.hpp"
