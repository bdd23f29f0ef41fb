// SPDX-License-Identifier: MIT
// The put path of providers with rails (see protocol.hpp for the protocol): the send and receive
// state machines with credits, slots, sequence words, multi-rail rounds and teardown, written once
// over a small static transport interface that each provider implements for its network. In
// three parts:
//   contract.hpp   what a transport supplies (checked by transport_conforms<T>()), and the window
//                  descriptions both sides exchange
//   sender.hpp     RailSender<T>, the send window
//   receiver.hpp   RailReceiver<T>, the receive window
#pragma once

#include "rails/contract.hpp"
#include "rails/receiver.hpp"
#include "rails/sender.hpp"
